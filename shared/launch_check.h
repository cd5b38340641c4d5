// Launch validation shared by the core (the authority) and mirrored by the
// client: grid and block shape, compiled workgroup size, and the constant
// block and bindings against the kernel's signature.
#ifndef HRX_SHARED_LAUNCH_CHECK_H_
#define HRX_SHARED_LAUNCH_CHECK_H_

#include <array>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "shared/kernel_signature.h"

namespace hrx::shared {

inline constexpr uint32_t kMaxBlockWorkItems = 1024;
inline constexpr size_t kConstantsCapacity = 256;

using Dim3 = std::array<uint32_t, 3>;

// INVALID_ARGUMENT "bad_launch_shape" for a zero grid or block dimension or a
// block of more than kMaxBlockWorkItems work-items; "workgroup_size_mismatch"
// when a dimension disagrees with a nonzero compiled size.
absl::Status CheckLaunchShape(std::string_view what, const Dim3& grid,
                              const Dim3& block,
                              const Dim3& compiled_workgroup_size);

// INVALID_ARGUMENT "constants_mismatch" / "bindings_mismatch" when the
// constant block's size or the binding count disagrees with the signature.
absl::Status CheckArguments(std::string_view what,
                            const KernelSignature& signature,
                            size_t constants_bytes, size_t binding_count);

// The signature's totals.
uint32_t ConstantBytes(const KernelSignature& signature);
uint32_t BindingCount(const KernelSignature& signature);

}  // namespace hrx::shared

#endif  // HRX_SHARED_LAUNCH_CHECK_H_
