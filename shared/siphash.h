// SipHash-2-4 (Aumasson and Bernstein): a fast keyed pseudorandom function
// with a 128-bit key, used to authenticate handles. Deterministic; no state.
#ifndef HRX_SHARED_SIPHASH_H_
#define HRX_SHARED_SIPHASH_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace hrx::shared {

using SipKey = std::array<uint8_t, 16>;

uint64_t SipHash24(const SipKey& key, const uint8_t* data, size_t length);

}  // namespace hrx::shared

#endif  // HRX_SHARED_SIPHASH_H_
