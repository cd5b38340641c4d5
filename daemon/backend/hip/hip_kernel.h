// A kernel entry loaded from a code object through the HIP module API, with
// its declared signature (the module's <entry>_hrx_info, hrx/gpu_kernel.h)
// and the parameter layout the launch packs into.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_KERNEL_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_KERNEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/hip/hip_platform.h"
#include "daemon/backend/hip/hip_reclaimer.h"

namespace hrx::backend {

// Where one parameter sits in the kernel's parameter block.
struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// The launch parameters of one dispatch: the parameter block and the
// per-parameter pointers into it that hipModuleLaunchKernel takes.
struct PackedParams {
  std::vector<uint8_t> block;
  std::vector<void*> pointers;
};

class HipKernel final : public Kernel {
 public:
  // INVALID_ARGUMENT ("bad_kernel: …") when the bytes do not load on this
  // GPU, lack the entry or its _hrx_info, or declare a layout the compiled
  // parameters contradict.
  static absl::StatusOr<std::shared_ptr<HipKernel>> Load(
      int device, std::string_view code, const std::string& entry,
      std::shared_ptr<HipReclaimer> reclaimer);
  ~HipKernel() override;
  HipKernel(const HipKernel&) = delete;
  HipKernel& operator=(const HipKernel&) = delete;

  const std::string& entry() const override { return entry_; }
  const KernelSignature& signature() const override { return signature_; }
  hipFunction_t function() const { return function_; }
  const std::vector<ParamSlot>& params() const { return params_; }

  // The parameters of a checked dispatch of this kernel.
  PackedParams Pack(const DispatchArgs& dispatch) const;
  // The same; for a dispatch a cache keeps (DispatchArgs::cached), packed
  // on its first launch and kept in its prepared slot, so a replayed launch
  // packs nothing. Immutable (the runtime copies parameters at launch), so
  // launches share it.
  std::shared_ptr<const PackedParams> PackedFor(
      const DispatchArgs& dispatch) const;

 private:
  HipKernel(hipModule_t module, hipFunction_t function, std::string entry,
            KernelSignature signature, std::vector<ParamSlot> params,
            uint32_t param_bytes, std::shared_ptr<HipReclaimer> reclaimer);

  const hipModule_t module_;  // one module per loaded kernel
  const hipFunction_t function_;
  const std::string entry_;
  const KernelSignature signature_;
  const std::vector<ParamSlot> params_;
  const uint32_t param_bytes_;
  const std::shared_ptr<HipReclaimer> reclaimer_;  // unloads the module
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_KERNEL_H_
