#include "daemon/executor/uid_leases.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hrx::executor {
namespace {

using ::testing::HasSubstr;

class UidLeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/uid-leases-test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/leases.lock";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
  std::string path_;
};

TEST_F(UidLeasesTest, AUidHeldByOneHolderIsRefusedToAnotherUntilItCloses) {
  auto first = UidLeases::Open(path_);
  auto second = UidLeases::Open(path_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  constexpr uid_t kBase = 2147352576;
  EXPECT_EQ(*(*first)->TryLease(kBase), true);
  EXPECT_EQ(*(*first)->TryLease(kBase), true) << "its own lease again";
  EXPECT_EQ(*(*second)->TryLease(kBase), false);
  EXPECT_EQ(*(*second)->TryLease(kBase + 1), true);
  EXPECT_EQ(*(*first)->TryLease(kBase + 1), false);
  // The highest uid a base may reach (4294967294) is a byte like any other.
  EXPECT_EQ(*(*first)->TryLease(static_cast<uid_t>(-2)), true);
  EXPECT_EQ(*(*second)->TryLease(static_cast<uid_t>(-2)), false);
  first->reset();
  EXPECT_EQ(*(*second)->TryLease(kBase), true) << "released on close";
}

TEST_F(UidLeasesTest, ALeaseOfAnotherProcessEndsWithIt) {
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto leases = UidLeases::Open(path_);
    const bool leased = leases.ok() && *(*leases)->TryLease(5000) == true;
    char byte = leased ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    (void)!read(done[0], &byte, 1);  // held until the parent says
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  auto leases = UidLeases::Open(path_);
  ASSERT_TRUE(leases.ok()) << leases.status();
  EXPECT_EQ(*(*leases)->TryLease(5000), false);
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(*(*leases)->TryLease(5000), true);
}

TEST_F(UidLeasesTest, ALinkOrAFileOthersMayWriteIsRefusedWithAFix) {
  ASSERT_EQ(symlink("/etc/passwd", path_.c_str()), 0);
  auto linked = UidLeases::Open(path_);
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(linked.status().message(), HasSubstr(path_));
  EXPECT_THAT(linked.status().message(), HasSubstr("Fix:"));
  ASSERT_EQ(unlink(path_.c_str()), 0);

  {
    auto made = UidLeases::Open(path_);
    ASSERT_TRUE(made.ok()) << made.status();
  }
  struct stat status {};
  ASSERT_EQ(stat(path_.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600u) << "made for hrxd alone";
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  auto shared = UidLeases::Open(path_);
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.status().message(), HasSubstr("mode 666"));
  EXPECT_THAT(shared.status().message(), HasSubstr("Fix:"));
}

}  // namespace
}  // namespace hrx::executor
