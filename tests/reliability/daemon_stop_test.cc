// The daemon itself stopped under load. (a) SIGTERM while load_worker
// processes are mid-load: every client's next call fails UNAVAILABLE
// daemon_unreachable, every client process exits (none hangs: one still
// running after kClientLimit is killed and the test fails), and the daemon
// drains queued work and exits 0 within its bound. (b) SIGKILL under load:
// clients get UNAVAILABLE; a daemon restarted on the same socket refuses the
// previous run's handles (previous_daemon_run), whether replayed by a raw
// client or used by the libhrx client that held them across the restart.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/internal/connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/handle.h"
#include "shared/status_matchers.h"
#include "tests/raw_session.h"
#include "tests/reliability/reliability_fixture.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kClients = 8;
// The daemon's stop bound (its default): half for calls in progress, half
// for queued work.
constexpr int kStopTimeoutMs = 20000;
// Bounds for hang detection, from the signal: clients must have exited, and
// the daemon too (its own bound plus start-up slack).
constexpr absl::Duration kClientLimit = absl::Seconds(30);
// 64 MiB fills queued ahead of the stop, still running when it arrives.
constexpr int kDrainFills = 48;
constexpr absl::Duration kDaemonLimit =
    absl::Milliseconds(kStopTimeoutMs + 10000);

struct ClientExit {
  std::optional<int> code;  // nullopt: hung, killed by the test
  double seconds = 0;       // from the signal
  std::string code_name;    // its "error_code:"
  std::string reason;       // its "error_reason:"
  std::string output;
};

class DaemonStopTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeShortTempDir(); }
  void TearDown() override {
    clients_.clear();  // kills and reaps any still running
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // kClients load_workers that run until they fail; each said "warm: yes".
  void StartLoad(const std::string& socket) {
    for (int i = 0; i < kClients; ++i) {
      clients_.push_back(std::make_unique<Subprocess>(Subprocess::Start(
          {RunfilePath("tests/reliability/load_worker"), "--socket=" + socket,
           absl::StrCat("--seed=", 900 + i), "--until=" + dir_ + "/never",
           "--kernel=" + ReliabilityKernelPath("write_pattern"), "--warm=150"},
          dir_)));
    }
    for (auto& client : clients_) {
      ASSERT_TRUE(WaitForOutput(*client, "warm: yes"))
          << client->Stdout() << client->Stderr();
    }
  }

  // Waits for every client (killing any still running at signal +
  // kClientLimit) and reads how each ended.
  std::vector<ClientExit> WaitForClients(absl::Time signalled) {
    std::vector<ClientExit> exits(clients_.size());
    std::vector<bool> done(clients_.size(), false);
    size_t remaining = clients_.size();
    while (remaining > 0 && absl::Now() < signalled + kClientLimit) {
      for (size_t i = 0; i < clients_.size(); ++i) {
        if (done[i]) continue;
        if (std::optional<int> code = clients_[i]->Poll()) {
          exits[i].code = code;
          exits[i].seconds = absl::ToDoubleSeconds(absl::Now() - signalled);
          done[i] = true;
          --remaining;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (!done[i]) {
        clients_[i]->Signal(SIGKILL);
        clients_[i]->Wait();
      }
      exits[i].output = clients_[i]->Stdout() + clients_[i]->Stderr();
      exits[i].code_name = LineValue(clients_[i]->Stdout(), "error_code");
      exits[i].reason = LineValue(clients_[i]->Stdout(), "error_reason");
    }
    return exits;
  }

  // Every client exited with a failed call (load_worker's exit 3: never a
  // wrong byte) that is UNAVAILABLE daemon_unreachable (or, after SIGTERM,
  // shutting_down) with a Fix; returns
  // "CODE/reason:count,..." and the slowest exit in seconds.
  std::pair<std::string, double> ExpectAllUnavailable(
      const std::vector<ClientExit>& exits, const std::string& when) {
    std::map<std::string, int> reasons;
    double slowest = 0;
    for (size_t i = 0; i < exits.size(); ++i) {
      const ClientExit& exit = exits[i];
      if (!exit.code.has_value()) {
        ADD_FAILURE() << when << ": client " << i << " still ran "
                      << absl::FormatDuration(kClientLimit)
                      << " after the signal (hung) and was killed:\n"
                      << exit.output;
        continue;
      }
      EXPECT_EQ(*exit.code, 3) << when << ": client " << i
                               << " should have exited on a failed call:\n"
                               << exit.output;
      const std::string message = LineValue(exit.output, "error_message");
      // A stopping hrxd says so to whoever it can still reach (a ring's
      // end carries its words); a killed one says nothing.
      const bool told_of_stop =
          when == "SIGTERM" && exit.reason == "shutting_down";
      const bool unavailable =
          exit.code_name == "UNAVAILABLE" &&
          (exit.reason == "daemon_unreachable" || told_of_stop) &&
          message.find("Fix:") != std::string::npos;
      EXPECT_TRUE(unavailable)
          << when << ": client " << i
          << " should have seen UNAVAILABLE daemon_unreachable"
          << (when == "SIGTERM" ? " or shutting_down" : "") << ":\n"
          << exit.output;
      ++reasons[absl::StrCat(exit.code_name, "/", exit.reason)];
      slowest = std::max(slowest, exit.seconds);
    }
    for (size_t i = 0; i < exits.size(); ++i) {
      std::printf("detail: %s client %zu exit %d after %.2f s in %s: %s %s\n",
                  when.c_str(), i, exits[i].code.value_or(-1), exits[i].seconds,
                  LineValue(exits[i].output, "failed").c_str(),
                  exits[i].code_name.c_str(), exits[i].reason.c_str());
    }
    std::vector<std::string> parts;
    for (const auto& [reason, count] : reasons)
      parts.push_back(absl::StrCat(reason, ":", count));
    return {absl::StrJoin(parts, ","), slowest};
  }

  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> clients_;
};

TEST_F(DaemonStopTest, SigtermUnderLoadDrainsEndsEveryClientAndExitsZero) {
  auto daemon = TestDaemon::Start(
      {absl::StrCat("--stop_timeout_ms=", kStopTimeoutMs)}, dir_);
  ASSERT_THAT(daemon.status(), IsOk());
  const std::string socket = (*daemon)->socket_path();
  Subprocess& process = (*daemon)->process();
  ASSERT_NO_FATAL_FAILURE(StartLoad(socket));

  // Queued work the stop must drain, not cut: a raw session's
  // kDrainFills x 64 MiB of fills, and its Synchronize in progress when the
  // signal arrives.
  RawSession raw(socket);
  ASSERT_THAT(raw.open_status, IsOk());
  auto buffer = raw.Allocate(64 << 20);
  auto stream = raw.CreateStream();
  ASSERT_THAT(buffer.status(), IsOk());
  ASSERT_THAT(stream.status(), IsOk());
  hrx::v1::SubmitRequest batch;
  *batch.mutable_stream() = *stream;
  for (int i = 0; i < kDrainFills; ++i) {
    *batch.add_commands() =
        FillRequest(*stream, *buffer, 0, 64 << 20, i).commands(0);
  }
  ASSERT_THAT(raw.Submit(batch), IsOk());
  // The Synchronize must be in progress in hrxd when the signal comes (a
  // call that reaches a stopping server is refused, rightly). It starts
  // first on the raw session's connection; a Poll on the same connection is
  // answered after it: the server reads one connection's calls in order,
  // so hrxd has taken the Synchronize by then.
  auto sync_context = raw.Context();
  hrx::v1::SynchronizeRequest sync_request;
  *sync_request.mutable_stream() = *stream;
  hrx::v1::SynchronizeResponse sync_response;
  grpc::Status sync_status;
  absl::Notification sync_done;
  raw.streams->async()->Synchronize(sync_context.get(), &sync_request,
                                    &sync_response, [&](grpc::Status status) {
                                      sync_status = std::move(status);
                                      sync_done.Notify();
                                    });
  absl::StatusOr<bool> complete = raw.Poll(*stream);
  if (!complete.ok()) {
    sync_context->TryCancel();
    sync_done.WaitForNotification();  // it refers to this frame
    FAIL() << "Poll: " << complete.status();
  }

  const absl::Time signalled = absl::Now();
  process.Signal(SIGTERM);
  // Else the stop had nothing to drain and proves nothing.
  const bool queued_at_signal = !*complete;
  const std::vector<ClientExit> exits = WaitForClients(signalled);
  const std::optional<int> daemon_code =
      WaitUntil(process, signalled + kDaemonLimit);
  const double daemon_seconds = absl::ToDoubleSeconds(absl::Now() - signalled);
  sync_done.WaitForNotification();
  const absl::Status synchronized = shared::FromGrpcStatus(sync_status);

  // Calls made once the daemon stopped accepting, and unary calls in flight
  // that its server cancelled (gRPC's bare CANCELLED, which libhrx never
  // asks for), both come back as UNAVAILABLE daemon_unreachable with a Fix.
  const auto [reasons, slowest] = ExpectAllUnavailable(exits, "SIGTERM");
  ASSERT_TRUE(daemon_code.has_value())
      << "hrxd did not exit within " << absl::FormatDuration(kDaemonLimit)
      << " of SIGTERM:\n"
      << process.Stderr();
  EXPECT_EQ(*daemon_code, 0) << process.Stderr();
  EXPECT_THAT(process.Stderr(), ::testing::Not(HasSubstr("did not drain")));
  // The call in progress completed: the queue was drained, not cut.
  EXPECT_TRUE(queued_at_signal)
      << "the queued fills had finished before SIGTERM: raise kDrainFills";
  EXPECT_THAT(synchronized, IsOk());
  std::printf(
      "figure: stop sigterm clients=%d client_reasons=%s "
      "slowest_client_exit_seconds=%.1f daemon_exit_seconds=%.1f "
      "stop_timeout_ms=%d\n",
      kClients, reasons.c_str(), slowest, daemon_seconds, kStopTimeoutMs);
  std::fflush(stdout);
}

TEST_F(DaemonStopTest, SigkillUnderLoadThenARestartRefusesThePreviousRun) {
  auto first = TestDaemon::Start({}, dir_);
  ASSERT_THAT(first.status(), IsOk());
  std::unique_ptr<TestDaemon> daemon = *std::move(first);
  const std::string socket = daemon->socket_path();
  const std::string go = dir_ + "/go";
  Subprocess holder =
      Subprocess::Start({RunfilePath("tests/reliability/restart_holder"),
                         "--socket=" + socket, "--go=" + go},
                        dir_);
  ASSERT_TRUE(WaitForOutput(holder, "ready: yes"))
      << holder.Stdout() << holder.Stderr();
  shared::WireHandle old_stream, old_buffer, old_session;
  ASSERT_TRUE(shared::ParseWireHandle(LineValue(holder.Stdout(), "stream"),
                                      &old_stream))
      << holder.Stdout();
  ASSERT_TRUE(shared::ParseWireHandle(LineValue(holder.Stdout(), "buffer"),
                                      &old_buffer))
      << holder.Stdout();
  ASSERT_TRUE(shared::ParseWireHandle(LineValue(holder.Stdout(), "session"),
                                      &old_session))
      << holder.Stdout();
  ASSERT_NO_FATAL_FAILURE(StartLoad(socket));

  const absl::Time signalled = absl::Now();
  daemon->process().Signal(SIGKILL);
  ASSERT_EQ(daemon->process().Wait(), 128 + SIGKILL);
  const std::vector<ClientExit> exits = WaitForClients(signalled);
  const auto [reasons, slowest] = ExpectAllUnavailable(exits, "SIGKILL");

  // A new daemon on the same socket (the killed one left its socket file;
  // its lock died with it).
  daemon.reset();
  auto second = TestDaemon::Start({}, dir_);
  ASSERT_THAT(second.status(), IsOk());
  daemon = *std::move(second);

  // A raw client replays the previous run's handles.
  RawSession fresh(socket);
  ASSERT_THAT(fresh.open_status, IsOk());
  auto fresh_buffer = fresh.Allocate(64);
  auto fresh_stream = fresh.CreateStream();
  ASSERT_THAT(fresh_buffer.status(), IsOk());
  ASSERT_THAT(fresh_stream.status(), IsOk());
  hrx::v1::Handle replayed_stream, replayed_buffer;
  client::internal::ToProto(old_stream, &replayed_stream);
  client::internal::ToProto(old_buffer, &replayed_buffer);
  EXPECT_THAT(
      fresh.Submit(FillRequest(replayed_stream, *fresh_buffer, 0, 1, 1)),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(StartsWith("previous_daemon_run: "), HasSubstr("Fix:"))));
  EXPECT_THAT(
      fresh.Submit(FillRequest(*fresh_stream, replayed_buffer, 0, 1, 1)),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               StartsWith("previous_daemon_run: ")));
  RawSession replayed_session(socket);
  client::internal::ToProto(old_session, &replayed_session.session);
  EXPECT_THAT(replayed_session.Allocate(64).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       StartsWith("previous_daemon_run: ")));

  // The libhrx client that held a stream and a buffer across the restart.
  std::ofstream(go) << "go";
  const std::optional<int> holder_code =
      WaitUntil(holder, absl::Now() + kClientLimit);
  ASSERT_TRUE(holder_code.has_value()) << "the holder hung after the restart:\n"
                                       << holder.Stdout() << holder.Stderr();
  EXPECT_EQ(*holder_code, 0) << holder.Stdout() << holder.Stderr();
  const std::string out = holder.Stdout();
  auto result = [&](const std::string& name) {
    return LineValue(out, "result " + name);
  };
  // The held stream's call ended with the daemon that was killed; asked,
  // the restarted daemon says why, and the stream reports that one error,
  // and keeps reporting it.
  EXPECT_THAT(result("stream_fill_synchronize"),
              AllOf(StartsWith("FAILED_PRECONDITION previous_daemon_run | "),
                    HasSubstr("Fix:")))
      << out << holder.Stderr();
  EXPECT_EQ(result("stream_synchronize_again"),
            result("stream_fill_synchronize"))
      << out;
  // Calls through the held session reach the new daemon, which refuses the
  // previous run's session.
  for (const char* name : {"allocate", "free", "create_stream"}) {
    EXPECT_THAT(result(name),
                AllOf(StartsWith("FAILED_PRECONDITION previous_daemon_run | "),
                      HasSubstr("Fix:")))
        << name << ":\n"
        << out;
  }
  // A new Client works.
  EXPECT_EQ(result("reconnect"), "OK") << out;

  std::printf(
      "figure: stop sigkill clients=%d client_reasons=%s "
      "slowest_client_exit_seconds=%.1f restarted=1 "
      "old_handles_refused=previous_daemon_run\n",
      kClients, reasons.c_str(), slowest);
  std::vector<std::string> answers;
  for (const char* name :
       {"stream_fill_synchronize", "stream_synchronize_again", "allocate",
        "free", "create_stream", "reconnect"}) {
    const std::string answer = result(name);
    answers.push_back(
        absl::StrCat(name, "=", answer.substr(0, answer.find(" | "))));
  }
  std::printf("figure: stop sigkill holder_after_restart %s\n",
              absl::StrJoin(answers, " ").c_str());
  std::fflush(stdout);
}

}  // namespace
}  // namespace hrx::testing
