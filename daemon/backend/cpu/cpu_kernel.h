// A CPU-backend kernel: an ELF shared object loaded from bytes through a
// memfd, following the C entry ABI of hrx/cpu_kernel.h.
#ifndef HRX_DAEMON_BACKEND_CPU_CPU_KERNEL_H_
#define HRX_DAEMON_BACKEND_CPU_CPU_KERNEL_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "hrx/cpu_kernel.h"

namespace hrx::backend {

class CpuKernel final : public Kernel {
 public:
  // INVALID_ARGUMENT when the bytes are not a loadable shared object, lack
  // `entry` or `entry`_info, or declare an unsupported signature.
  static absl::StatusOr<std::shared_ptr<CpuKernel>> Load(
      std::string_view code, const std::string& entry);
  // Unloads the object once no thread it may have started is alive
  // (object_unloader.h).
  ~CpuKernel() override;
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  const std::string& entry() const override { return entry_; }
  const KernelSignature& signature() const override { return signature_; }
  hrx_cpu_kernel_fn function() const { return function_; }

 private:
  CpuKernel(void* module, int fd, std::vector<pid_t> threads_before,
            std::string entry, hrx_cpu_kernel_fn function,
            KernelSignature signature)
      : module_(module),
        fd_(fd),
        threads_before_(std::move(threads_before)),
        entry_(std::move(entry)),
        function_(function),
        signature_(std::move(signature)) {}

  void* const module_;
  const int fd_;  // the memfd the module was loaded from
  // The process's threads before dlopen (LiveThreads()).
  const std::vector<pid_t> threads_before_;
  const std::string entry_;
  const hrx_cpu_kernel_fn function_;
  const KernelSignature signature_;
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_CPU_CPU_KERNEL_H_
