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

}  // namespace
}  // namespace hrx::shared
