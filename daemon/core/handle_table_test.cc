#include "daemon/core/handle_table.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::HandleKind;
using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

TEST(HandleTableTest, FindsWhatWasInserted) {
  HandleTable<std::string> table(HandleKind::kBuffer);
  const uint64_t a = table.Insert("a");
  const uint64_t b = table.Insert("b");
  EXPECT_EQ(**table.Find(a, "t"), "a");
  EXPECT_EQ(**table.Find(b, "t"), "b");
  EXPECT_EQ(table.size(), 2u);
}

TEST(HandleTableTest, RefusesStaleGenerationAfterSlotReuse) {
  HandleTable<std::string> table(HandleKind::kBuffer);
  const uint64_t old_handle = table.Insert("old");
  ASSERT_THAT(table.Remove(old_handle, "free").status(), IsOk());
  const uint64_t new_handle = table.Insert("new");
  EXPECT_EQ(shared::Handle::Decode(new_handle).slot,
            shared::Handle::Decode(old_handle).slot);
  EXPECT_THAT(table.Find(old_handle, "fill dst"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("stale_handle: fill dst")));
  EXPECT_EQ(**table.Find(new_handle, "t"), "new");
}

TEST(HandleTableTest, AMirrorStoresUnderTheIssuersHandles) {
  HandleTable<std::string> issuer(HandleKind::kBuffer);
  HandleTable<std::string> mirror(HandleKind::kBuffer);
  issuer.Insert("a");
  const uint64_t b = issuer.Insert("b");
  ASSERT_THAT(mirror.InsertAt(b, "b"), IsOk());
  EXPECT_EQ(**mirror.Find(b, "t"), "b");
  // Occupied, another kind, generation 0: refused.
  EXPECT_THAT(mirror.InsertAt(b, "again"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds an object")));
  EXPECT_FALSE(
      mirror.InsertAt(shared::Handle{HandleKind::kKernel, 5, 1}.Encode(), "k")
          .ok());
  EXPECT_FALSE(
      mirror.InsertAt(shared::Handle{HandleKind::kBuffer, 5, 0}.Encode(), "z")
          .ok());
  // Revoked, then installed again (a graph exec whose failure was cleared).
  ASSERT_THAT(mirror.Remove(b, "revoke").status(), IsOk());
  EXPECT_THAT(mirror.InsertAt(b, "b"), IsOk());
  // The last slot a mirror may name, and the first it may not.
  EXPECT_THAT(mirror.InsertAt(
                  shared::Handle{HandleKind::kBuffer, kMaxMirroredSlots - 1, 1}
                      .Encode(),
                  "edge"),
              IsOk());
  EXPECT_FALSE(
      mirror
          .InsertAt(shared::Handle{HandleKind::kBuffer, kMaxMirroredSlots, 1}
                        .Encode(),
                    "past")
          .ok());
}

TEST(HandleTableTest, RefusesDoubleRemove) {
  HandleTable<std::string> table(HandleKind::kBuffer);
  const uint64_t handle = table.Insert("x");
  ASSERT_THAT(table.Remove(handle, "free").status(), IsOk());
  EXPECT_THAT(table.Remove(handle, "free"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("stale_handle")));
}

TEST(HandleTableTest, RefusesWrongKindAndUnknownSlots) {
  HandleTable<std::string> buffers(HandleKind::kBuffer);
  const uint64_t handle = buffers.Insert("x");
  shared::Handle as_stream = shared::Handle::Decode(handle);
  as_stream.kind = HandleKind::kStream;
  EXPECT_THAT(buffers.Find(as_stream.Encode(), "t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is a stream handle where a buffer handle")));
  const uint64_t unknown = shared::Handle{HandleKind::kBuffer, 99, 1}.Encode();
  EXPECT_THAT(
      buffers.Find(unknown, "t"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown_handle")));
  EXPECT_THAT(buffers.Find(0, "t"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("wrong_handle_kind")));
}

}  // namespace
}  // namespace hrx::daemon
