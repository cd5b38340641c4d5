#include "daemon/backend/cpu/cpu_kernel.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/backend/cpu/object_unloader.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

static_assert(HRX_CPU_ARG_SCALAR == static_cast<int>(ArgKind::kScalar) &&
              HRX_CPU_ARG_BUFFER == static_cast<int>(ArgKind::kBuffer));

absl::Status Refuse(const std::string& entry, const std::string& why,
                    const std::string& fix) {
  return Refusal(
      Reason::kBadKernel,
      absl::StrFormat("load kernel %s: %s. Fix: %s", entry, why, fix));
}

absl::StatusOr<KernelSignature> ReadSignature(const std::string& entry,
                                              const hrx_cpu_kernel_info& info) {
  constexpr char kFix[] = "build the kernel against hrx/cpu_kernel.h";
  if (info.abi != HRX_CPU_KERNEL_ABI) {
    return Refuse(entry,
                  absl::StrFormat("%s_info declares ABI %u; this daemon runs "
                                  "ABI %u",
                                  entry, info.abi, HRX_CPU_KERNEL_ABI),
                  kFix);
  }
  if (info.arg_count > HRX_CPU_MAX_ARGS ||
      (info.arg_count != 0 && info.args == nullptr)) {
    return Refuse(entry,
                  absl::StrFormat("%s_info declares %u arguments (at most %u)",
                                  entry, info.arg_count, HRX_CPU_MAX_ARGS),
                  kFix);
  }
  KernelSignature signature;
  for (int d = 0; d < 3; ++d)
    signature.workgroup_size[d] = info.workgroup_size[d];
  for (uint32_t i = 0; i < info.arg_count; ++i) {
    const hrx_cpu_arg& arg = info.args[i];
    const std::optional<KernelArg> declared =
        shared::DeclaredArg(arg.kind, arg.size);
    if (!declared) {
      return Refuse(entry,
                    absl::StrFormat("argument %u has kind %u and size %u; "
                                    "scalars are 4 or 8 bytes, buffers 0",
                                    i, arg.kind, arg.size),
                    kFix);
    }
    signature.args.push_back(*declared);
  }
  return signature;
}

}  // namespace

absl::StatusOr<std::shared_ptr<CpuKernel>> CpuKernel::Load(
    std::string_view code, const std::string& entry) {
  if (entry.empty()) {
    return Refuse("\"\"", "the entry name is empty",
                  "name the kernel's exported entry function");
  }
  const int fd = memfd_create("hrx-kernel", MFD_CLOEXEC);
  if (fd < 0) {
    return Refusal(
        Reason::kMemfdFailed,
        absl::StrCat("load kernel ", entry, ": ", std::strerror(errno),
                     ". Fix: raise the daemon's open-file limit."));
  }
  size_t written = 0;
  while (written < code.size()) {
    const ssize_t n = write(fd, code.data() + written, code.size() - written);
    if (n <= 0) {
      close(fd);
      return Refusal(Reason::kMemfdFailed,
                     absl::StrCat("load kernel ", entry, ": write: ",
                                  std::strerror(errno), ". Fix: free memory."));
    }
    written += static_cast<size_t>(n);
  }
  // dlopen reads the object through the descriptor; RTLD_LOCAL keeps one
  // kernel's symbols from resolving another's. The descriptor stays open
  // while the kernel is loaded: glibc matches objects by path before
  // anything else, so two live kernels must never share a /proc path.
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  std::vector<pid_t> threads_before = LiveThreads();
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    close(fd);
    const char* error = dlerror();
    return Refuse(entry,
                  absl::StrCat("the code object is not a loadable shared "
                               "object (",
                               error != nullptr ? error : "unknown", ")"),
                  "send the bytes of an ELF .so built for this machine");
  }
  auto* function =
      reinterpret_cast<hrx_cpu_kernel_fn>(dlsym(module, entry.c_str()));
  const auto* info = static_cast<const hrx_cpu_kernel_info*>(
      dlsym(module, absl::StrCat(entry, "_info").c_str()));
  if (function == nullptr || info == nullptr) {
    // Its constructors ran: they may have started threads too.
    ObjectUnloader::Get().Unload(module, fd, std::move(threads_before));
    return Refuse(
        entry,
        absl::StrFormat("the object exports no %s%s", entry,
                        function == nullptr ? "" : "_info"),
        absl::StrCat("export ", entry, " and ", entry, "_info with C linkage"));
  }
  auto signature = ReadSignature(entry, *info);
  if (!signature.ok()) {
    ObjectUnloader::Get().Unload(module, fd, std::move(threads_before));
    return signature.status();
  }
  return std::shared_ptr<CpuKernel>(new CpuKernel(
      module, fd, threads_before, entry, function, *std::move(signature)));
}

CpuKernel::~CpuKernel() {
  ObjectUnloader::Get().Unload(module_, fd_, threads_before_);
}

}  // namespace hrx::backend
