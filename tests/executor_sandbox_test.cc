// The executor sandbox: a kernel (CPU code, so this runs on the CPU
// backend) tries to reach hrxd's memory, descriptors and environment,
// another executor's memory, a ptrace hold and the network; every attempt
// is refused, and it runs as an unprivileged user.
#include <errno.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/isolation_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::HasSubstr;

TEST_F(IsolationTest, AKernelCannotReachTheDaemonOrAnotherExecutor) {
  // The bystander's work runs on the shared executor: start it first.
  Subprocess bystander = StartBystander(/*rounds=*/2);
  ExpectBystanderUnharmed(bystander);
  const pid_t daemon = daemon_->process().pid();
  const pid_t shared = ExecutorPid(daemon, "shared");
  ASSERT_GT(shared, 0);
  auto attacker = Connect();
  ASSERT_THAT(attacker.status(), IsOk());
  auto out = attacker->stream->Allocate(64);
  ASSERT_THAT(out.status(), IsOk());
  Constants pids;
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(daemon)), IsOk());
  ASSERT_THAT(pids.Push(static_cast<uint32_t>(shared)), IsOk());
  ASSERT_THAT(Run(*attacker, "snoop", pids, *out), IsOk());
  std::vector<uint8_t> bytes(64);
  ASSERT_THAT(attacker->stream->ReadBlocking(out->Binding(), bytes), IsOk());
  const char* attempts[] = {"hrxd's memory",
                            "hrxd's environment",
                            "hrxd's descriptors",
                            "the shared executor's memory",
                            "ptrace of the shared executor",
                            "a TCP socket",
                            "signalling hrxd",
                            "signalling the shared executor"};
  for (int i = 0; i < 8; ++i) {
    uint32_t error = 0;
    std::memcpy(&error, bytes.data() + 4 * i, 4);
    EXPECT_TRUE(error == EACCES || error == EPERM)
        << attempts[i] << ": the kernel got errno " << error
        << " (0: it succeeded)";
  }
  // The kernel ran as an unprivileged user, not as hrxd's root.
  const pid_t own = ExecutorPid(daemon, "ops");
  ASSERT_GT(own, 0);
  std::ifstream status(absl::StrCat("/proc/", own, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      EXPECT_THAT(line, ::testing::Not(HasSubstr("	0	")));
    }
  }
}

}  // namespace
}  // namespace hrx::testing
