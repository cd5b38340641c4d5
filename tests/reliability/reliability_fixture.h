// Helpers shared by the reliability tests: a real hrxd with tenants from a
// config file, an admin connection that stays open (so the daemon's
// descriptor count moves only with the clients under test), the daemon's
// descriptors and resident memory from /proc, tenants' usage, and child
// processes waited on with a bound (a client that hangs is killed and
// reported, never waited on forever).
#ifndef HRX_TESTS_RELIABILITY_RELIABILITY_FIXTURE_H_
#define HRX_TESTS_RELIABILITY_RELIABILITY_FIXTURE_H_

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {

// Path of a test kernel's code object for the backend under test.
inline std::string ReliabilityKernelPath(const std::string& name) {
  return TestBackend() == "hip"
             ? RunfilePath("tests/kernels/gpu/" + name + ".cubin")
             : RunfilePath("tests/kernels/" + name + ".so");
}

// Open descriptors of process `pid` (entries of /proc/<pid>/fd, "." and
// ".." included, as the other suites count them), 0 when it is gone.
inline size_t ProcessFds(pid_t pid) {
  size_t count = 0;
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

// The descriptors of `pid` in one pass over /proc/<pid>/fd: all of them
// (counted as ProcessFds counts) and those that are memfds of buffers
// ("/memfd:hrx-buffer"): the daemon keeps one for each host-reachable
// allocation it maps, so their number moves with every client's buffers,
// allocation pool and staging.
struct FdCount {
  size_t all = 0;
  size_t buffers = 0;
  size_t others() const { return all - buffers; }
};
inline FdCount CountFds(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  FdCount count;
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return count;
  while (dirent* entry = readdir(listing)) {
    ++count.all;
    char target[256] = {};
    const std::string link = dir + "/" + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target).rfind("/memfd:hrx-buffer", 0) == 0) {
      ++count.buffers;
    }
  }
  closedir(listing);
  return count;
}

// What the descriptors of `pid` point at, for failure messages.
inline std::string FdTargets(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  std::map<std::string, int> kinds;  // target (inode numbers cut) -> count
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return "";
  while (dirent* entry = readdir(listing)) {
    char target[256] = {};
    const std::string link = dir + "/" + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0) {
      std::string kind = target;
      if (const size_t bracket = kind.find(":["); bracket != std::string::npos)
        kind = kind.substr(0, bracket);
      ++kinds[kind];
    }
  }
  closedir(listing);
  std::string out;
  for (const auto& [kind, count] : kinds)
    absl::StrAppend(&out, kind, " x", count, "; ");
  return out;
}

// VmRSS of `pid` in bytes (0 when it cannot be read).
inline uint64_t ProcessRssBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::string value(absl::StripAsciiWhitespace(line.substr(6)));
      if (value.size() > 3 && value.substr(value.size() - 3) == " kB")
        value.resize(value.size() - 3);
      uint64_t kib = 0;
      (void)absl::SimpleAtoi(value, &kib);
      return kib << 10;
    }
  }
  return 0;
}

// Every counter of a tenant's usage is zero.
inline bool AllZero(const hrx::v1::Usage& usage) {
  return usage.device_bytes() == 0 && usage.shared_bytes() == 0 &&
         usage.streams() == 0 && usage.kernels() == 0 && usage.graphs() == 0 &&
         usage.inflight_commands() == 0 && usage.sessions() == 0 &&
         usage.buffers() == 0 && usage.exports() == 0 &&
         usage.connections() == 0 && usage.events() == 0 &&
         usage.grants() == 0 && usage.reply_bytes() == 0;
}

// The Admin service over one connection of its own, opened once.
class AdminConnection {
 public:
  explicit AdminConnection(const std::string& socket_path) {
    grpc::ChannelArguments own;
    own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub_ = hrx::v1::Admin::NewStub(grpc::CreateCustomChannel(
        "unix:" + socket_path, grpc::InsecureChannelCredentials(), own));
  }

  // The tenant's record (a test failure and an empty record when missing).
  hrx::v1::TenantInfo Tenant(const std::string& name) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    hrx::v1::ListTenantsResponse response;
    const grpc::Status listed =
        stub_->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response);
    EXPECT_TRUE(listed.ok()) << "ListTenants: " << listed.error_message();
    for (const auto& tenant : response.tenants()) {
      if (tenant.name() == name) return tenant;
    }
    ADD_FAILURE() << "no tenant " << name;
    return {};
  }

 private:
  std::unique_ptr<hrx::v1::Admin::Stub> stub_;
};

// Polls `done` every 20 ms until it holds or `limit` passes.
template <typename Predicate>
bool PollUntil(Predicate done, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    if (done()) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Waits for `child` until `deadline`; then SIGKILLs it and returns nullopt
// (it hung). Otherwise its exit code.
inline std::optional<int> WaitUntil(Subprocess& child, absl::Time deadline) {
  while (absl::Now() < deadline) {
    if (std::optional<int> code = child.Poll()) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (std::optional<int> code = child.Poll()) return code;
  child.Signal(SIGKILL);
  child.Wait();
  return std::nullopt;
}

// The value of the first "key=VALUE" field on a line starting with
// `prefix` in `text`, or 0.
inline uint64_t FieldOf(const std::string& text, const std::string& prefix,
                        const std::string& key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      if (absl::StartsWith(field, key + "=")) {
        uint64_t value = 0;
        if (absl::SimpleAtoi(field.substr(key.size() + 1), &value))
          return value;
      }
    }
  }
  return 0;
}

// The value of the first "key: VALUE" line in `text`, or "".
inline std::string LineValue(const std::string& text, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, key + ": ")) {
      return std::string(line.substr(key.size() + 2));
    }
  }
  return "";
}

// The daemon's settled descriptor count.
inline size_t SettledFds(pid_t pid) {
  return Settled([pid] { return ProcessFds(pid); });
}

}  // namespace hrx::testing

#endif  // HRX_TESTS_RELIABILITY_RELIABILITY_FIXTURE_H_
