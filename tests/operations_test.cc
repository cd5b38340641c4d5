// hrxd as an operated service: the systemd notify protocol, socket
// activation, config reload on SIGHUP, hrxctl's listings and live view, and
// the metrics endpoint — each against a real daemon process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Hrxd(const std::string& socket_path,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {DaemonPath(), "--socket=" + socket_path,
                                   "--backend=cpu"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

RunResult Hrxctl(const std::string& socket_path, std::vector<std::string> args,
                 const std::string& dir) {
  args.insert(args.begin(),
              {RunfilePath("client/hrxctl"), "--socket=" + socket_path});
  return RunToCompletion(args, dir);
}

int BindUnix(int type, const std::string& path) {
  const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(OperationsTest, TellsSystemdItIsReadyWhatItDoesAndThatItLives) {
  const std::string dir = MakeShortTempDir();
  const int notify = BindUnix(SOCK_DGRAM, dir + "/notify");
  ASSERT_GE(notify, 0);
  Subprocess daemon = Subprocess::Start(
      Hrxd(dir + "/hrxd.sock"), dir,
      {"NOTIFY_SOCKET=" + dir + "/notify", "WATCHDOG_USEC=200000"});
  std::string seen;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < give_up &&
         (seen.find("READY=1") == std::string::npos ||
          seen.find("WATCHDOG=1") == std::string::npos)) {
    pollfd waiting{notify, POLLIN, 0};
    if (poll(&waiting, 1, 100) <= 0) continue;
    char message[4096];
    const ssize_t n = recv(notify, message, sizeof(message), 0);
    if (n > 0) seen.append(message, n).append("\n");
  }
  EXPECT_THAT(seen, AllOf(HasSubstr("READY=1"),
                          HasSubstr("STATUS=serving 0 sessions, 0 streams"),
                          HasSubstr("WATCHDOG=1")));
  // READY only once the socket answers.
  EXPECT_TRUE(WaitUntilServing(dir + "/hrxd.sock", &daemon));
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  char message[4096];
  std::string last;
  while (true) {
    const ssize_t n = recv(notify, message, sizeof(message), MSG_DONTWAIT);
    if (n <= 0) break;
    last.append(message, n);
  }
  EXPECT_THAT(last, HasSubstr("STOPPING=1"));
  close(notify);
}

TEST(OperationsTest, ServesOnASocketPassedTheWaySystemdDoes) {
  const std::string dir = MakeShortTempDir();
  const std::string path = dir + "/activated.sock";
  const int listening = BindUnix(SOCK_STREAM, path);
  ASSERT_GE(listening, 0);
  ASSERT_EQ(listen(listening, 16), 0);
  // LISTEN_PID must be the daemon's own pid: the shell sets it, then becomes
  // hrxd with exec (the same process).
  Subprocess daemon = Subprocess::Start(
      {"/bin/sh", "-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" --backend=cpu",
       DaemonPath()},
      dir, {}, listening);
  close(listening);
  ASSERT_TRUE(WaitUntilServing(path, &daemon)) << daemon.Stderr();
  auto client = Client::Connect(path);
  ASSERT_THAT(client.status(), IsOk());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  ASSERT_THAT(stream.status(), IsOk());
  auto buffer = stream->Allocate(64);
  ASSERT_THAT(buffer.status(), IsOk());
  ASSERT_THAT(stream->Fill(buffer->Binding(), 3), IsOk());
  ASSERT_THAT(stream->Synchronize(), IsOk());
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  EXPECT_THAT(daemon.Stderr(), HasSubstr("(socket activation)"));
}

TEST(OperationsTest, SighupReloadsBudgetsAndKeepsThemWhenTheFileIsBroken) {
  const std::string dir = MakeShortTempDir();
  const std::string config = dir + "/hrxd.conf";
  auto write = [&](const std::string& text) { std::ofstream(config) << text; };
  // uid 0 (this test) is an admin, so that hrxctl may list tenants.
  const std::string ops =
      "tenants { name: \"ops\" uids: 0 role: ROLE_ADMIN }\n";
  write(ops +
        "tenants { name: \"alpha\" uids: 4001 budget { device_bytes: 1048576 } "
        "}\n");
  auto daemon =
      TestDaemon::Start({"--config=" + config, "--log-level=info"}, dir);
  ASSERT_THAT(daemon.status(), IsOk());
  const std::string socket_path = (*daemon)->socket_path();
  auto alpha_budget = [&] {
    const RunResult tenants = Hrxctl(socket_path, {"tenants", "--json"}, dir);
    const size_t at = tenants.out.find("{\"name\": \"alpha\"");
    const size_t budget =
        tenants.out.find("\"budget\": {\"device_bytes\": ", at);
    if (at == std::string::npos || budget == std::string::npos) {
      return "missing: " + tenants.out + tenants.err;
    }
    return tenants.out.substr(budget + 27,
                              tenants.out.find(',', budget) - budget - 27);
  };
  EXPECT_EQ(alpha_budget(), "1048576");
  write(ops +
        "tenants { name: \"alpha\" uids: 4001 budget { device_bytes: 2097152 } "
        "}\n");
  (*daemon)->process().Signal(SIGHUP);
  std::string now;
  for (int i = 0; i < 500 && (now = alpha_budget()) != "2097152"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(now, "2097152");
  write("tenants {\n  name: \"alpha\"\n  uids: oops\n}\n");  // line 3
  (*daemon)->process().Signal(SIGHUP);
  for (int i = 0; i < 500 && (*daemon)->process().Stderr().find(
                                 "kept the previous") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT((*daemon)->process().Stderr(),
              AllOf(HasSubstr("SIGHUP: kept the previous config"),
                    HasSubstr("config_invalid"), HasSubstr("line 3")));
  EXPECT_EQ(alpha_budget(), "2097152");
}

class OperationsClientTest : public ClientFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    std::vector<std::string> flags = {
        "--metrics_listen=" + std::to_string(metrics_port_)};  // loopback
    if (per_tenant_metrics()) flags.push_back("--metrics_tenants");
    return flags;
  }
  virtual bool per_tenant_metrics() const { return true; }
  std::string Get(const std::string& path) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(metrics_port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
        0) {
      close(fd);
      return "";
    }
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!write(fd, request.data(), request.size());
    std::string response;
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof(chunk))) > 0) response.append(chunk, n);
    close(fd);
    return response;
  }
  int metrics_port_ = FreeLoopbackPort();
};

TEST_F(OperationsClientTest, HrxctlListsSessionsAndBuffersAsTablesAndJson) {
  Buffer device = Allocate(*stream_, 4096);
  auto shared = stream_->AllocateShared(8192);
  ASSERT_THAT(shared.status(), IsOk());
  const std::string socket_path = daemon_->socket_path();
  const RunResult sessions = Hrxctl(socket_path, {"sessions"}, daemon_->dir());
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  EXPECT_THAT(
      sessions.out,
      AllOf(ContainsRegex("^ID +TENANT +UID +PID"),
            ContainsRegex(absl::StrCat("local +0 +", getpid(), " +2 +1 "))));
  const RunResult sessions_json =
      Hrxctl(socket_path, {"sessions", "--json"}, daemon_->dir());
  EXPECT_THAT(
      sessions_json.out,
      AllOf(HasSubstr("\"tenant\": \"local\""),
            HasSubstr(absl::StrCat("\"pid\": ", getpid())),
            HasSubstr("\"buffers\": 2"), HasSubstr("\"buffer_bytes\": 12288")));
  const RunResult buffers = Hrxctl(socket_path, {"buffers"}, daemon_->dir());
  EXPECT_THAT(buffers.out,
              AllOf(ContainsRegex("^SESSION +TENANT +BUFFER +BYTES"),
                    ContainsRegex("4.00 KiB +[0-9]+ +device"),
                    ContainsRegex("8.00 KiB +[0-9]+ +shared")));
  const std::string session =
      absl::StrFormat("%016x", client_->session().session);
  const RunResult mine =
      Hrxctl(socket_path, {"buffers", "--session=" + session, "--json"},
             daemon_->dir());
  EXPECT_THAT(mine.out,
              AllOf(HasSubstr("\"bytes\": 4096"), HasSubstr("\"shared\": true"),
                    HasSubstr("\"session\": \"" + session + "\"")));
  const RunResult none = Hrxctl(
      socket_path, {"buffers", "--tenant=nobody", "--json"}, daemon_->dir());
  EXPECT_EQ(none.out, "[]\n");
  for (const char* command :
       {"status", "tenants", "sessions", "buffers", "budget", "evict", "top"}) {
    const RunResult help =
        Hrxctl(socket_path, {command, "--help"}, daemon_->dir());
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.out, HasSubstr("usage: hrxctl")) << command;
  }
  EXPECT_EQ(Hrxctl(socket_path, {"evict", "zz"}, daemon_->dir()).exit_code, 2);
  EXPECT_EQ(Hrxctl(socket_path, {"evict", "0000000000000001"}, daemon_->dir())
                .exit_code,
            3);  // refused: no such session
}

TEST_F(OperationsClientTest, TopRendersInATerminalAndQuitsOnQ) {
  int terminal = -1;
  const std::string hrxctl = RunfilePath("client/hrxctl");
  const std::string socket = "--socket=" + daemon_->socket_path();
  const pid_t child = forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl(hrxctl.c_str(), hrxctl.c_str(), socket.c_str(), "top",
          "--interval=100", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string screen;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < give_up &&
         screen.find("TENANT") == std::string::npos) {
    pollfd output{terminal, POLLIN, 0};
    if (poll(&output, 1, 100) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(terminal, chunk, sizeof(chunk));
    if (n > 0) screen.append(chunk, n);
  }
  EXPECT_THAT(screen, AllOf(HasSubstr("hrxctl top"), HasSubstr("backend"),
                            HasSubstr("TENANT")));
  ASSERT_EQ(write(terminal, "q", 1), 1);
  int status = 0;
  for (int i = 0; i < 500 && waitpid(child, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(terminal);
}

TEST_F(OperationsClientTest, MetricsExposeUseCachesAndRefusalsByReason) {
  Buffer buffer = Allocate(*stream_, 1 << 20);
  for (int i = 0; i < 3; ++i)
    ASSERT_THAT(stream_->Fill(buffer.Binding(), 1), IsOk());
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  RawSession raw(daemon_->socket_path());
  const hrx::v1::Handle raw_stream = *raw.CreateStream();
  const hrx::v1::Handle raw_buffer = *raw.Allocate(16);
  ASSERT_FALSE(raw.Submit(FillRequest(raw_stream, raw_buffer, 8, 16, 1)).ok());
  const std::string metrics = Get("/metrics");
  EXPECT_THAT(
      metrics,
      AllOf(HasSubstr("200 OK"), HasSubstr("text/plain; version=0.0.4"),
            HasSubstr("\nhrxd_sessions 2\n"),
            ContainsRegex("\nhrxd_commands_submitted_total [1-9]"),
            HasSubstr("hrxd_tenant_usage{tenant=\"local\",resource="
                      "\"device_bytes\"} 1048592"),
            HasSubstr("hrxd_cache_hits_total{cache=\"transfer\"} 2"),
            HasSubstr("hrxd_refusals_total{reason=\"view_out_of_range\"} 1"),
            HasSubstr("# TYPE hrxd_refusals_total counter")));
  EXPECT_THAT(Get("/other"), HasSubstr("404"));
}

// Per-tenant figures tell tenants about each other: off unless asked for.
class DefaultMetricsTest : public OperationsClientTest {
 protected:
  bool per_tenant_metrics() const override { return false; }
};

TEST_F(DefaultMetricsTest, PerTenantSeriesAreOffByDefault) {
  Buffer buffer = Allocate(*stream_, 4096);
  const std::string metrics = Get("/metrics");
  EXPECT_THAT(metrics,
              AllOf(HasSubstr("200 OK"), HasSubstr("\nhrxd_sessions 1\n")));
  EXPECT_THAT(metrics, Not(HasSubstr("hrxd_tenant_")));
}

// Silent connections hold only themselves: a scrape is answered while
// several others say nothing (each is closed at its deadline).
TEST_F(DefaultMetricsTest, SilentConnectionsDoNotDelayAScrape) {
  std::vector<int> silent;
  for (int i = 0; i < 8; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(metrics_port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    silent.push_back(fd);
  }
  EXPECT_THAT(Get("/metrics"), HasSubstr("200 OK"));
  // Served while every silent connection is still open: a server taking one
  // connection at a time would have had to time each of them out first.
  for (int fd : silent) {
    char byte;
    EXPECT_EQ(recv(fd, &byte, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    close(fd);
  }
}

}  // namespace
}  // namespace hrx::testing
