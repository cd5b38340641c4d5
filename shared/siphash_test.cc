#include "shared/siphash.h"

#include <vector>

#include "gtest/gtest.h"

namespace hrx::shared {
namespace {

SipKey ReferenceKey() {
  SipKey key;
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  return key;
}

// Vectors from the SipHash paper's reference implementation (key 00..0f,
// message 00..(n-1)).
TEST(SipHash24, MatchesTheReferenceVectors) {
  std::vector<uint8_t> message;
  EXPECT_EQ(SipHash24(ReferenceKey(), message.data(), 0),
            0x726fdb47dd0e0e31ULL);
  for (int i = 0; i < 15; ++i) message.push_back(static_cast<uint8_t>(i));
  EXPECT_EQ(SipHash24(ReferenceKey(), message.data(), 15),
            0xa129ca6149be45e5ULL);
}

TEST(SipHash24, ChangesWithKeyAndMessage) {
  const uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 9};
  SipKey other = ReferenceKey();
  other[0] ^= 1;
  EXPECT_NE(SipHash24(ReferenceKey(), a, 8), SipHash24(ReferenceKey(), b, 8));
  EXPECT_NE(SipHash24(ReferenceKey(), a, 8), SipHash24(other, a, 8));
}

}  // namespace
}  // namespace hrx::shared
