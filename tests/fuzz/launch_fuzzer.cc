// Fuzzes the launch checks a dispatch meets before any kernel runs: the
// grid and block shape against kMaxBlockWorkItems and the kernel's compiled
// workgroup size, and the constants and bindings against its signature.
// Input: grid, block and compiled size (9 x u32), constants bytes and
// binding count (2 x u32), then one byte per argument (kind, size class).
// Checks: an accepted launch has no zero dimension, a block of at most
// kMaxBlockWorkItems work-items that matches every fixed dimension, and
// exactly the signature's constant bytes and buffer count; a refusal carries
// a catalogued reason.
#include <cstdint>
#include <cstring>

#include "shared/kernel_signature.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

uint32_t Take(const uint8_t*& data, size_t& size) {
  uint32_t value = 0;
  const size_t n = size < sizeof(value) ? size : sizeof(value);
  std::memcpy(&value, data, n);
  data += n;
  size -= n;
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hrx::shared::Dim3;
  Dim3 grid{}, block{}, compiled{};
  for (auto* dims : {&grid, &block, &compiled}) {
    for (uint32_t& d : *dims) d = Take(data, size);
  }
  const uint32_t constants_bytes = Take(data, size);
  const uint32_t binding_count = Take(data, size) % 4096;
  hrx::shared::KernelSignature signature;
  signature.workgroup_size = compiled;
  for (; size > 0 && signature.args.size() < 512; ++data, --size) {
    static constexpr uint32_t kSizes[] = {0, 4, 8, 2};
    auto arg = hrx::shared::DeclaredArg(*data & 3, kSizes[(*data >> 2) & 3]);
    if (arg) signature.args.push_back(*arg);
  }

  const absl::Status shape =
      hrx::shared::CheckLaunchShape("fuzz", grid, block, compiled);
  if (shape.ok()) {
    uint64_t items = 1;
    for (int i = 0; i < 3; ++i) {
      HRX_FUZZ_CHECK(grid[i] != 0 && block[i] != 0);
      HRX_FUZZ_CHECK(compiled[i] == 0 || compiled[i] == block[i]);
      items *= block[i];
    }
    HRX_FUZZ_CHECK(items <= hrx::shared::kMaxBlockWorkItems);
  } else {
    HRX_FUZZ_CHECK(hrx::ReasonOf(shape).has_value());
  }

  const absl::Status arguments = hrx::shared::CheckArguments(
      "fuzz", signature, constants_bytes, binding_count);
  if (arguments.ok()) {
    HRX_FUZZ_CHECK(constants_bytes == hrx::shared::ConstantBytes(signature));
    HRX_FUZZ_CHECK(binding_count == hrx::shared::BindingCount(signature));
  } else {
    HRX_FUZZ_CHECK(hrx::ReasonOf(arguments).has_value());
  }
  return 0;
}
