// hrxctl as operators run it: a separate process against a running daemon.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hrx/client.h"
#include "shared/status_matchers.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Hrxctl() { return RunfilePath("client/hrxctl"); }

class HrxctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = TestDaemon::Start();
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
  }
  RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(),
                {Hrxctl(), absl::StrCat("--socket=", daemon_->socket_path())});
    return RunToCompletion(args, daemon_->dir());
  }
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(HrxctlTest, StatusJsonReportsBackendAndLiveUse) {
  auto client = Client::Connect(daemon_->socket_path());
  ASSERT_THAT(client.status(), IsOk());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(stream.status(), IsOk());
  auto buffer = stream->Allocate(4096);
  ASSERT_THAT(buffer.status(), IsOk());

  const RunResult result = Run({"status", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("{"));
  EXPECT_THAT(
      result.out,
      AllOf(HasSubstr(absl::StrCat("\"backend\": \"", TestBackend(), "\"")),
            HasSubstr("\"queue_count\": 8"), HasSubstr("\"sessions\": 1"),
            HasSubstr("\"streams\": 1"), HasSubstr("\"buffers\": 1"),
            HasSubstr("\"bytes_in_use\": 4096"),
            ContainsRegex("\"device_memory_bytes\": [1-9][0-9]*"),
            HasSubstr(TestBackend() == "cpu" ? "\"integrated\": true"
                                             : "\"integrated\": "),
            ContainsRegex("\"handle_kinds\": \\[\"shm\"")));
}

TEST_F(HrxctlTest, StatusTableIsAligned) {
  const RunResult result = Run({"status"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(
      result.out,
      AllOf(ContainsRegex(absl::StrCat("(^|\n)backend +", TestBackend(), "\n")),
            ContainsRegex("\nqueues +8 \\(0 created\\)\n"),
            ContainsRegex("\nsessions +0\n"),
            ContainsRegex("\nbytes in use +0 B\n")));
  // Values start in one column.
  const size_t backend_value = result.out.find(TestBackend());
  const size_t queues_line = result.out.find("\nqueues");
  const size_t queues_value = result.out.find("8", queues_line);
  EXPECT_THAT(result.out, ContainsRegex("\ndispatch cache +0 entries, 0 B, 0 "
                                        "hits, 0 misses, 0 evictions\n"));
  EXPECT_EQ(backend_value, queues_value - (queues_line + 1));
}

TEST_F(HrxctlTest, ExitCodesTellUsageFromUnreachable) {
  EXPECT_EQ(Run({"status", "--bogus"}).exit_code, 2);
  EXPECT_EQ(Run({"frobnicate"}).exit_code, 2);
  const RunResult help = Run({"status", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: hrxctl"));
  const RunResult missing = RunToCompletion(
      {Hrxctl(), "--socket=" + daemon_->dir() + "/none.sock", "status"},
      daemon_->dir());
  EXPECT_EQ(missing.exit_code, 4);
  EXPECT_THAT(missing.err, AllOf(HasSubstr("daemon_unreachable"),
                                 HasSubstr("none.sock"), HasSubstr("Fix:")));
}

}  // namespace
}  // namespace hrx::testing

namespace hrx::testing {
namespace {

TEST_F(HrxctlTest, BoundTenantsAreCreatedListedWithTheirPodAndRemoved) {
  RunResult made =
      Run({"bound", "create", "pod-x", "device_bytes=65536",
           "label:hrx.dev/pod=team/trainer", "label:hrx.dev/container=main"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_THAT(made.out, HasSubstr("/tenants/pod-x/hrxd.sock"));
  // A session through the tenant's socket shows in its row.
  auto client = Client::Connect(daemon_->dir() + "/tenants/pod-x/hrxd.sock");
  ASSERT_THAT(client.status(), IsOk());

  const RunResult table = Run({"bound"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("NAME"), HasSubstr("POD"),
                    ContainsRegex("pod-x +team/trainer +main +0 B / 64.00 "
                                  "KiB +1 "),
                    HasSubstr("1 of at most 256 bound tenants")));
  const RunResult json = Run({"bound", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, AllOf(HasSubstr("\"name\": \"pod-x\""),
                              HasSubstr("\"pod\": \"team/trainer\""),
                              HasSubstr("\"sessions\": 1"),
                              HasSubstr("\"device_bytes\": 65536")));

  const RunResult relabelled =
      Run({"bound", "label", "pod-x", "hrx.dev/pod=team/other"});
  ASSERT_EQ(relabelled.exit_code, 0) << relabelled.err;
  EXPECT_THAT(Run({"bound"}).out, HasSubstr("team/other"));

  const RunResult bad = Run({"bound", "create", "Bad_Name"});
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_THAT(bad.err, AllOf(HasSubstr("bad_tenant_name"), HasSubstr("Fix:")));

  const RunResult removed = Run({"bound", "remove", "pod-x", "--json"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_THAT(removed.out, AllOf(HasSubstr("\"closed_sessions\": 1"),
                                 HasSubstr("\"closed_connections\": 1")));
  EXPECT_THAT(Run({"bound"}).out, HasSubstr("0 of at most 256"));
}

TEST_F(HrxctlTest, HealthSaysServingAndUnreachable) {
  const RunResult serving = Run({"health"});
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "serving\n");
  const RunResult nobody = RunToCompletion(
      {Hrxctl(), "--socket=" + daemon_->dir() + "/none.sock", "health"},
      daemon_->dir());
  EXPECT_EQ(nobody.exit_code, 4);
  EXPECT_THAT(nobody.err, HasSubstr("daemon_unreachable"));
}

}  // namespace
}  // namespace hrx::testing
