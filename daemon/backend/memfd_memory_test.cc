#include "daemon/backend/memfd_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::backend {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

// A memfd as an executor hands one over: sized, sealed against shrinking.
int SealedMemfd(unsigned int flags, uint64_t bytes) {
  const int fd = memfd_create("memfd-test", MFD_ALLOW_SEALING | flags);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(MemfdMappingTest, AdoptsASealedMemfdAndSharesItsPages) {
  const int fd = SealedMemfd(0, 8192);
  ASSERT_GE(fd, 0);
  void* maker = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(maker, MAP_FAILED);
  static_cast<uint8_t*>(maker)[5000] = 0x77;
  auto adopted = MemfdMapping::Adopt(dup(fd), 8192);
  ASSERT_THAT(adopted.status(), IsOk());
  EXPECT_EQ(adopted->data()[5000], 0x77);
  munmap(maker, 8192);
  close(fd);
}

TEST(MemfdMappingTest, RefusesAnUnsealedOrShorterMemfd) {
  const int unsealed = memfd_create("memfd-test", MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  EXPECT_THAT(
      MemfdMapping::Adopt(unsealed, 4096),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("sealed")));
  EXPECT_THAT(
      MemfdMapping::Adopt(SealedMemfd(0, 4096), 8192),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("smaller")));
}

// A hostile executor's hugetlbfs memfd passes the seal and size checks; once
// its pages are punched out with the huge-page pool exhausted, the next
// touch in the importer would be SIGBUS.
TEST(MemfdMappingTest, RefusesAHugetlbMemfd) {
  const uint64_t huge_page = 2 << 20;
  const int fd = SealedMemfd(MFD_HUGETLB, huge_page);
  if (fd < 0) {
    GTEST_SKIP() << "this kernel makes no hugetlb memfd (errno " << errno
                 << "), so it cannot be handed over either";
  }
  EXPECT_THAT(
      MemfdMapping::Adopt(fd, huge_page),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("tmpfs")));
}

}  // namespace
}  // namespace hrx::backend
