#include "shared/handle.h"

#include "gtest/gtest.h"

namespace hrx::shared {
namespace {

TEST(Handle, RoundTripsKindSlotAndGeneration) {
  const Handle handle{HandleKind::kStream, 0xfffffffeu, 0x00abcdefu};
  const Handle decoded = Handle::Decode(handle.Encode());
  EXPECT_EQ(decoded, handle);
  EXPECT_EQ(HandleKindName(decoded.kind), "stream");
}

TEST(Handle, DistinctKindsNeverShareAWireValue) {
  const Handle buffer{HandleKind::kBuffer, 1, 1};
  const Handle stream{HandleKind::kStream, 1, 1};
  EXPECT_NE(buffer.Encode(), stream.Encode());
}

TEST(Handle, ZeroDecodesAsInvalid) {
  EXPECT_EQ(Handle::Decode(0).kind, HandleKind::kInvalid);
  EXPECT_EQ(HandleKindName(HandleKind{200}), "invalid");
}

TEST(WireHandle, FormatsAndParsesTheSessionMetadataForm) {
  const WireHandle handle{0x0123456789abcdefULL, 2, 0xfedcba9876543210ULL, 4};
  const std::string text = FormatWireHandle(handle);
  EXPECT_EQ(text,
            "0123456789abcdef.0000000000000002.fedcba9876543210."
            "0000000000000004");
  WireHandle parsed;
  ASSERT_TRUE(ParseWireHandle(text, &parsed));
  EXPECT_EQ(parsed, handle);
  EXPECT_FALSE(ParseWireHandle("12", &parsed));
  EXPECT_FALSE(ParseWireHandle(std::string(text).replace(3, 1, "G"), &parsed));
  EXPECT_FALSE(ParseWireHandle(std::string(text).replace(16, 1, ":"), &parsed));
}

}  // namespace
}  // namespace hrx::shared
