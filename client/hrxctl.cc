// hrxctl: inspect the hrx daemon.
//
//   hrxctl [--socket=PATH] status [--json]
//
// Exit codes: 0 success, 2 usage error, 3 the daemon refused the request,
// 4 no daemon answers at the socket.
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "hrx/v1/status.grpc.pb.h"
#include "shared/bytes.h"
#include "shared/socket_path.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitRefused = 3;
constexpr int kExitUnreachable = 4;

constexpr char kUsage[] =
    "usage: hrxctl [--socket=PATH] <command> [options]\n"
    "\n"
    "commands:\n"
    "  status [--json]   backend, target, device memory, queues, sessions and\n"
    "                    bytes in use\n"
    "\n"
    "options:\n"
    "  --socket=PATH     daemon socket (default: $HRXD_SOCKET, else the\n"
    "                    per-user default)\n"
    "  --help            this text\n"
    "\n"
    "exit codes: 0 ok, 2 usage error, 3 refused by the daemon, 4 daemon\n"
    "unreachable\n";

constexpr char kStatusUsage[] =
    "usage: hrxctl [--socket=PATH] status [--json]\n"
    "\n"
    "Prints the daemon's backend, device, target, device memory, queue count,\n"
    "open sessions, streams, buffers, kernels, events, device bytes in use,\n"
    "and the counters (entries, bytes, hits, misses, evictions) of the\n"
    "dispatch and transfer caches and the allocation and staging pools, as an\n"
    "aligned table or, with --json, as one JSON object.\n";

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string CountersJson(const hrx::v1::CacheCounters& c) {
  return absl::StrFormat(
      "{\"entries\": %u, \"bytes\": %u, \"hits\": %u, \"misses\": %u, "
      "\"evictions\": %u}",
      c.entries(), c.bytes(), c.hits(), c.misses(), c.evictions());
}

std::string CountersText(const hrx::v1::CacheCounters& c) {
  return absl::StrFormat("%u entries, %s, %u hits, %u misses, %u evictions",
                         c.entries(), hrx::shared::FormatBytes(c.bytes()),
                         c.hits(), c.misses(), c.evictions());
}

void PrintStatusJson(const hrx::v1::GetStatusResponse& s) {
  const hrx::v1::DeviceInfo& d = s.device();
  std::fputs(
      absl::StrFormat(
          "{\"backend\": %s, \"device\": %s, \"target\": %s, "
          "\"device_memory_bytes\": %u, \"queue_count\": %u, "
          "\"queues_created\": %u, \"version\": %s, \"pid\": %u, "
          "\"uptime_seconds\": %u, \"sessions\": %u, \"streams\": %u, "
          "\"buffers\": %u, \"kernels\": %u, \"events\": %u, "
          "\"bytes_in_use\": %u, \"commands_submitted\": %u, "
          "\"dispatch_cache\": %s, \"transfer_cache\": %s, "
          "\"allocation_pool\": %s, \"staging_pool\": %s, "
          "\"upload_staging\": %s}\n",
          JsonString(d.backend()), JsonString(d.name()),
          JsonString(d.target()), d.memory_bytes(), d.queue_count(),
          s.queues_created(), JsonString(s.version()), s.pid(),
          s.uptime_seconds(), s.sessions(), s.streams(), s.buffers(),
          s.kernels(), s.events(), s.bytes_in_use(), s.commands_submitted(),
          CountersJson(s.dispatch_cache()), CountersJson(s.transfer_cache()),
          CountersJson(s.allocation_pool()), CountersJson(s.staging_pool()),
          CountersJson(s.upload_staging()))
          .c_str(),
      stdout);
}

void PrintStatusTable(const hrx::v1::GetStatusResponse& s) {
  const hrx::v1::DeviceInfo& d = s.device();
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"backend", d.backend()},
      {"device", d.name()},
      {"target", d.target()},
      {"device memory", hrx::shared::FormatBytes(d.memory_bytes())},
      {"queues", absl::StrCat(d.queue_count(), " (", s.queues_created(),
                              " created)")},
      {"sessions", absl::StrCat(s.sessions())},
      {"streams", absl::StrCat(s.streams())},
      {"buffers", absl::StrCat(s.buffers())},
      {"bytes in use", hrx::shared::FormatBytes(s.bytes_in_use())},
      {"kernels", absl::StrCat(s.kernels())},
      {"events", absl::StrCat(s.events())},
      {"commands", absl::StrCat(s.commands_submitted())},
      {"dispatch cache", CountersText(s.dispatch_cache())},
      {"transfer cache", CountersText(s.transfer_cache())},
      {"allocation pool", CountersText(s.allocation_pool())},
      {"staging pool", CountersText(s.staging_pool())},
      {"upload staging", CountersText(s.upload_staging())},
      {"version", s.version()},
      {"pid", absl::StrCat(s.pid())},
      {"uptime", absl::StrCat(s.uptime_seconds(), " s")},
  };
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  for (const auto& row : rows) {
    std::printf("%-*s  %s\n", static_cast<int>(width), row.first.c_str(),
                row.second.c_str());
  }
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "hrxctl: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kUnavailable ? kExitUnreachable
                                                         : kExitRefused;
}

int Status(const std::string& socket_path, bool json) {
  auto channel = hrx::client::internal::MakeChannel(socket_path);
  auto stub = hrx::v1::DaemonStatus::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  hrx::v1::GetStatusRequest request;
  hrx::v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  if (!status.ok()) {
    return Fail(hrx::client::internal::CallStatus(status, socket_path));
  }
  if (json) {
    PrintStatusJson(response);
  } else {
    PrintStatusTable(response);
  }
  return kExitOk;
}

int Usage(const char* text, const std::string& error) {
  if (!error.empty()) std::fprintf(stderr, "hrxctl: %s\n", error.c_str());
  std::fputs(text, stderr);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path;
  std::string command;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (command.empty() && arg.rfind("--socket=", 0) == 0) {
      socket_path = arg.substr(9);
    } else if (command.empty() && arg == "--socket" && i + 1 < argc) {
      socket_path = argv[++i];
    } else if (command.empty() && (arg == "--help" || arg == "-h")) {
      std::fputs(kUsage, stdout);
      return kExitOk;
    } else if (command.empty() && arg.rfind("-", 0) != 0) {
      command = arg;
    } else if (command.empty()) {
      return Usage(kUsage, absl::StrCat("unknown option ", arg));
    } else {
      rest.push_back(arg);
    }
  }
  if (command.empty()) return Usage(kUsage, "no command given");
  socket_path = hrx::shared::ResolveClientSocketPath(socket_path);
  if (command == "status") {
    bool json = false;
    for (const std::string& arg : rest) {
      if (arg == "--json") {
        json = true;
      } else if (arg == "--help" || arg == "-h") {
        std::fputs(kStatusUsage, stdout);
        return kExitOk;
      } else {
        return Usage(kStatusUsage, absl::StrCat("status: unknown option ", arg));
      }
    }
    return Status(socket_path, json);
  }
  return Usage(kUsage, absl::StrCat("unknown command ", command));
}
