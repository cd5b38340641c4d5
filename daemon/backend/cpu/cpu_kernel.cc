#include "daemon/backend/cpu/cpu_kernel.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

// This process's threads (/proc/self/stat's num_threads), or 0 when it
// cannot be read.
int ThreadCount() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  // The command name, in parentheses, may hold spaces: fields are counted
  // from the last ')'. num_threads is field 20; the one after ')' is 3.
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(text).substr(name_end + 1), ' ', absl::SkipEmpty());
  int threads = 0;
  if (fields.size() <= 17 || !absl::SimpleAtoi(fields[17], &threads)) return 0;
  return threads;
}

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
  const int threads_before = ThreadCount();
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
    dlclose(module);
    close(fd);
    return Refuse(
        entry,
        absl::StrFormat("the object exports no %s%s", entry,
                        function == nullptr ? "" : "_info"),
        absl::StrCat("export ", entry, " and ", entry, "_info with C linkage"));
  }
  auto signature = ReadSignature(entry, *info);
  if (!signature.ok()) {
    dlclose(module);
    close(fd);
    return signature.status();
  }
  return std::shared_ptr<CpuKernel>(new CpuKernel(
      module, fd, threads_before, entry, function, *std::move(signature)));
}

CpuKernel::~CpuKernel() {
  // More threads than before the load: some may be the kernel's, running
  // (or about to run) its code. Threads of the process's own that came
  // since (a new queue) keep an object mapped too: a small cost, where
  // unmapping code a thread runs is a crash.
  const int threads_now = ThreadCount();
  if (threads_before_ == 0 || threads_now == 0 ||
      threads_now > threads_before_) {
    return;
  }
  dlclose(module_);
  close(fd_);
}

}  // namespace hrx::backend
