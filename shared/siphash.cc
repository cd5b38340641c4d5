#include "shared/siphash.h"

#include <cstring>

namespace hrx::shared {
namespace {

uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t Load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];  // little-endian
  return v;
}

struct State {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
};

}  // namespace

uint64_t SipHash24(const SipKey& key, const uint8_t* data, size_t length) {
  const uint64_t k0 = Load64(key.data());
  const uint64_t k1 = Load64(key.data() + 8);
  State s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
          k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
  const size_t whole = length - length % 8;
  for (size_t i = 0; i < whole; i += 8) {
    const uint64_t m = Load64(data + i);
    s.v3 ^= m;
    s.Round();
    s.Round();
    s.v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(length & 0xff) << 56;
  for (size_t i = 0; i < length % 8; ++i) {
    last |= static_cast<uint64_t>(data[whole + i]) << (8 * i);
  }
  s.v3 ^= last;
  s.Round();
  s.Round();
  s.v0 ^= last;
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace hrx::shared
