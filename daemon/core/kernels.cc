#include "daemon/core/kernels.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

std::string SignatureText(const backend::KernelSignature& signature) {
  std::string text = "(";
  for (size_t i = 0; i < signature.args.size(); ++i) {
    if (i != 0) text += ", ";
    text += signature.args[i].kind == backend::ArgKind::kBuffer
                ? std::string("buffer")
                : absl::StrFormat("scalar%u", signature.args[i].size * 8);
  }
  return text + absl::StrFormat(
                    ") workgroup [%u, %u, %u]", signature.workgroup_size[0],
                    signature.workgroup_size[1], signature.workgroup_size[2]);
}

}  // namespace

absl::StatusOr<KernelInfo> Kernels::Load(
    uint64_t session, std::string_view code, const std::string& entry,
    const backend::KernelSignature* declared) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "load kernel"));
  // Checked before a byte of the object is mapped: on the CPU backend
  // loading runs the object's code (its constructors) inside hrxd.
  if (!owner->tenant->load_kernels()) {
    return Refusal(
        Reason::kKernelLoadingNotAllowed,
        absl::StrFormat(
            "load kernel %s: tenant \"%s\" (%s) may "
            "not load kernels; a kernel runs with the daemon's privileges. "
            "Fix: "
            "set load_kernels: true on the tenant in the config, for tenants "
            "trusted as the daemon's own user.",
            entry, owner->tenant->name(), owner->Who()));
  }
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kKernels, 1,
                             absl::StrFormat("load kernel %s", entry),
                             owner->Who()));
  {
    absl::MutexLock lock(&owner->mu);
    if (owner->kernels.size() >= kMaxKernelsPerSession) {
      return Refusal(
          Reason::kTooManyKernels,
          absl::StrFormat(
              "load kernel %s: the session holds %u kernels, "
              "the limit is %u. Fix: unload kernels it no longer uses.",
              entry, owner->kernels.size(), kMaxKernelsPerSession));
    }
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<backend::Backend> backend,
                       devices_.For(*owner->tenant));
  HRX_ASSIGN_OR_RETURN(backend::KernelRef kernel,
                       backend->LoadKernel(code, entry));
  if (declared != nullptr &&
      (declared->args != kernel->signature().args ||
       declared->workgroup_size != kernel->signature().workgroup_size)) {
    return Refusal(
        Reason::kSignatureMismatch,
        absl::StrFormat(
            "load kernel %s: declared %s but the module "
            "declares %s. Fix: declare the kernel's real signature, or none to "
            "use the module's.",
            entry, SignatureText(*declared),
            SignatureText(kernel->signature())));
  }
  absl::MutexLock lock(&owner->mu);
  KernelInfo info{0, entry, kernel->signature()};
  info.handle =
      owner->kernels.Insert(KernelEntry{std::move(kernel), std::move(charge)});
  return info;
}

absl::StatusOr<backend::KernelRef> Kernels::Find(uint64_t session,
                                                 uint64_t kernel,
                                                 std::string_view what) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(KernelEntry * entry, owner->kernels.Find(kernel, what));
  return entry->kernel;
}

absl::Status Kernels::Unload(uint64_t session, uint64_t kernel) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(KernelEntry entry,
                         owner->kernels.Remove(kernel, "unload kernel"));
    const backend::KernelRef removed = entry.kernel;
    owner->streams.ForEach([&](const std::shared_ptr<StreamEntry>& stream) {
      stream->dispatch_cache.EvictIf([&](const backend::DispatchRef& dispatch) {
        return dispatch->kernel == removed;
      });
    });
  }
  sessions_.mirrors().Revoke(session, kernel);
  return absl::OkStatus();
}

}  // namespace hrx::daemon
