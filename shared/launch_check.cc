#include "shared/launch_check.h"

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::shared {
namespace {

std::string Dims(const Dim3& d) {
  return absl::StrFormat("[%u, %u, %u]", d[0], d[1], d[2]);
}

}  // namespace

absl::Status CheckLaunchShape(std::string_view what, const Dim3& grid,
                              const Dim3& block,
                              const Dim3& compiled_workgroup_size) {
  uint64_t work_items = 1;
  bool zero = false;
  for (int d = 0; d < 3; ++d) {
    zero = zero || grid[d] == 0 || block[d] == 0;
    // Stop multiplying once past the limit: three 32-bit factors could
    // otherwise exceed 64 bits.
    if (work_items <= kMaxBlockWorkItems) work_items *= block[d];
  }
  if (zero || work_items > kMaxBlockWorkItems) {
    return Refusal(
        Reason::kBadLaunchShape,
        absl::StrFormat(
            "%s: grid %s and block %s; every dimension must be "
            "nonzero and a block at most %u work-items (this one has %u). Fix: "
            "pass a nonzero grid and a block of 1 to %u work-items.",
            what, Dims(grid), Dims(block), kMaxBlockWorkItems, work_items,
            kMaxBlockWorkItems));
  }
  for (int d = 0; d < 3; ++d) {
    if (compiled_workgroup_size[d] != 0 &&
        compiled_workgroup_size[d] != block[d]) {
      return Refusal(
          Reason::kWorkgroupSizeMismatch,
          absl::StrFormat(
              "%s: block %s disagrees with the kernel's "
              "compiled workgroup size %s (0 means any). Fix: launch with the "
              "compiled block size.",
              what, Dims(block), Dims(compiled_workgroup_size)));
    }
  }
  return absl::OkStatus();
}

uint32_t ConstantBytes(const KernelSignature& signature) {
  uint32_t bytes = 0;
  for (const KernelArg& arg : signature.args) {
    if (arg.kind == ArgKind::kScalar) bytes += arg.size;
  }
  return bytes;
}

uint32_t BindingCount(const KernelSignature& signature) {
  uint32_t count = 0;
  for (const KernelArg& arg : signature.args) {
    if (arg.kind == ArgKind::kBuffer) ++count;
  }
  return count;
}

absl::Status CheckArguments(std::string_view what,
                            const KernelSignature& signature,
                            size_t constants_bytes, size_t binding_count) {
  const uint32_t want_bytes = ConstantBytes(signature);
  if (constants_bytes != want_bytes) {
    return Refusal(
        Reason::kConstantsMismatch,
        absl::StrFormat(
            "%s: %u bytes of constants where the kernel's "
            "scalars take %u. Fix: push exactly the kernel's scalar arguments, "
            "in declaration order, at their declared widths.",
            what, constants_bytes, want_bytes));
  }
  const uint32_t want_bindings = BindingCount(signature);
  if (binding_count != want_bindings) {
    return Refusal(
        Reason::kBindingsMismatch,
        absl::StrFormat("%s: %u bindings where the kernel takes %u buffer "
                        "arguments. Fix: bind one view per buffer argument.",
                        what, binding_count, want_bindings));
  }
  return absl::OkStatus();
}

}  // namespace hrx::shared
