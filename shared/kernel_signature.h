// What a kernel requires of a launch: its arguments in declaration order and
// any compiled workgroup size. Shared by the daemon (which learns it from the
// module) and the client (which checks launches before sending them).
#ifndef HRX_SHARED_KERNEL_SIGNATURE_H_
#define HRX_SHARED_KERNEL_SIGNATURE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace hrx::shared {

// A scalar of 4 or 8 bytes packed into the constant block, or a buffer
// binding.
enum class ArgKind : uint8_t { kScalar = 1, kBuffer = 2 };

struct KernelArg {
  ArgKind kind = ArgKind::kScalar;
  uint32_t size = 0;  // 4 or 8 for scalars; 0 for buffers
  friend bool operator==(const KernelArg&, const KernelArg&) = default;
};

// The argument a kernel's declaration names by `kind` (numbered as ArgKind,
// in both kernel ABIs) and `size`: a scalar of 4 or 8 bytes or a buffer of
// size 0; nothing for any other pair.
inline std::optional<KernelArg> DeclaredArg(uint8_t kind, uint32_t size) {
  if (kind == static_cast<uint8_t>(ArgKind::kScalar) &&
      (size == 4 || size == 8)) {
    return KernelArg{ArgKind::kScalar, size};
  }
  if (kind == static_cast<uint8_t>(ArgKind::kBuffer) && size == 0) {
    return KernelArg{ArgKind::kBuffer, 0};
  }
  return std::nullopt;
}

struct KernelSignature {
  std::vector<KernelArg> args;
  // A nonzero entry fixes the block size in that dimension.
  std::array<uint32_t, 3> workgroup_size = {0, 0, 0};
  friend bool operator==(const KernelSignature&,
                         const KernelSignature&) = default;
};

}  // namespace hrx::shared

#endif  // HRX_SHARED_KERNEL_SIGNATURE_H_
