// hrxctl: inspect the hrx daemon.
//
//   hrxctl [--socket=PATH] status [--json]
//   hrxctl [--socket=PATH] tenants [--json]
//   hrxctl [--socket=PATH] sessions [--tenant=NAME] [--json]
//   hrxctl [--socket=PATH] budget set TENANT FIELD=VALUE...
//   hrxctl [--socket=PATH] evict SESSION_ID
//
// Exit codes: 0 success, 2 usage error, 3 the daemon refused the request,
// 4 no daemon answers at the socket.
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "hrx/v1/admin.grpc.pb.h"
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
    "  status [--json]   backend, target, device memory, queues, sessions,\n"
    "                    bytes in use, cache and pool counters\n"
    "  tenants [--json]  each tenant's role, sessions, and use against budget\n"
    "  sessions [--tenant=NAME] [--json]\n"
    "                    open sessions: tenant, uid, pid, buffers, streams\n"
    "  budget set TENANT FIELD=VALUE...   (admin) replace budget fields:\n"
    "                    device_bytes, shared_bytes, streams, kernels, graphs,\n"
    "                    inflight_commands; VALUE is a number or unlimited\n"
    "  evict SESSION_ID  (admin) close a session as if its client had\n"
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

std::string HandleKindsJson(const hrx::v1::GetStatusResponse& s) {
  std::string out;
  for (const std::string& kind : s.handle_kinds()) {
    if (!out.empty()) out += ", ";
    out += JsonString(kind);
  }
  return out;
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
          "\"upload_staging\": %s, \"handle_kinds\": [%s]}\n",
          JsonString(d.backend()), JsonString(d.name()),
          JsonString(d.target()), d.memory_bytes(), d.queue_count(),
          s.queues_created(), JsonString(s.version()), s.pid(),
          s.uptime_seconds(), s.sessions(), s.streams(), s.buffers(),
          s.kernels(), s.events(), s.bytes_in_use(), s.commands_submitted(),
          CountersJson(s.dispatch_cache()), CountersJson(s.transfer_cache()),
          CountersJson(s.allocation_pool()), CountersJson(s.staging_pool()),
          CountersJson(s.upload_staging()), HandleKindsJson(s))
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
      {"handle kinds", absl::StrJoin(s.handle_kinds(), ", ")},
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

std::unique_ptr<hrx::v1::Admin::Stub> ConnectAdmin(
    const std::string& socket_path, grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  return hrx::v1::Admin::NewStub(hrx::client::internal::MakeChannel(socket_path));
}

std::string Limit(bool has, uint64_t value, bool bytes) {
  if (!has) return "unlimited";
  return bytes ? hrx::shared::FormatBytes(value) : absl::StrCat(value);
}

std::string LimitJson(bool has, uint64_t value) {
  return has ? absl::StrCat(value) : "null";
}

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size()
                  ? row[i]
                  : absl::StrFormat("%-*s  ", static_cast<int>(widths[i]), row[i]);
    }
    std::printf("%s\n", line.c_str());
  }
}

int Tenants(const std::string& socket_path, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(socket_path, context);
  hrx::v1::ListTenantsResponse response;
  const grpc::Status status =
      stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response);
  if (!status.ok()) {
    return Fail(hrx::client::internal::CallStatus(status, socket_path));
  }
  if (json) {
    std::string out = "[";
    for (const auto& t : response.tenants()) {
      const auto& b = t.budget();
      const auto& u = t.usage();
      if (out.size() > 1) out += ", ";
      out += absl::StrFormat(
          "{\"name\": %s, \"role\": %s, \"sessions\": %u, \"usage\": "
          "{\"device_bytes\": %u, \"shared_bytes\": %u, \"streams\": %u, "
          "\"kernels\": %u, \"graphs\": %u, \"inflight_commands\": %u}, "
          "\"budget\": {\"device_bytes\": %s, \"shared_bytes\": %s, "
          "\"streams\": %s, \"kernels\": %s, \"graphs\": %s, "
          "\"inflight_commands\": %s}}",
          JsonString(t.name()), JsonString(hrx::v1::Role_Name(t.role())),
          t.sessions(), u.device_bytes(), u.shared_bytes(), u.streams(),
          u.kernels(), u.graphs(), u.inflight_commands(),
          LimitJson(b.has_device_bytes(), b.device_bytes()),
          LimitJson(b.has_shared_bytes(), b.shared_bytes()),
          LimitJson(b.has_streams(), b.streams()),
          LimitJson(b.has_kernels(), b.kernels()),
          LimitJson(b.has_graphs(), b.graphs()),
          LimitJson(b.has_inflight_commands(), b.inflight_commands()));
    }
    std::printf("%s]\n", out.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TENANT", "ROLE", "SESSIONS", "DEVICE", "SHARED", "STREAMS", "KERNELS",
       "INFLIGHT"}};
  for (const auto& t : response.tenants()) {
    const auto& b = t.budget();
    const auto& u = t.usage();
    rows.push_back(
        {t.name(), hrx::v1::Role_Name(t.role()).substr(5),
         absl::StrCat(t.sessions()),
         hrx::shared::FormatBytes(u.device_bytes()) + " / " +
             Limit(b.has_device_bytes(), b.device_bytes(), true),
         hrx::shared::FormatBytes(u.shared_bytes()) + " / " +
             Limit(b.has_shared_bytes(), b.shared_bytes(), true),
         absl::StrCat(u.streams()) + " / " +
             Limit(b.has_streams(), b.streams(), false),
         absl::StrCat(u.kernels()) + " / " +
             Limit(b.has_kernels(), b.kernels(), false),
         absl::StrCat(u.inflight_commands()) + " / " +
             Limit(b.has_inflight_commands(), b.inflight_commands(), false)});
  }
  PrintTable(rows);
  return kExitOk;
}

int Sessions(const std::string& socket_path, const std::string& tenant,
             bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(socket_path, context);
  hrx::v1::ListSessionsRequest request;
  request.set_tenant(tenant);
  hrx::v1::ListSessionsResponse response;
  const grpc::Status status = stub->ListSessions(&context, request, &response);
  if (!status.ok()) {
    return Fail(hrx::client::internal::CallStatus(status, socket_path));
  }
  if (json) {
    std::string out = "[";
    for (const auto& s : response.sessions()) {
      if (out.size() > 1) out += ", ";
      out += absl::StrFormat(
          "{\"id\": \"%016x\", \"tenant\": %s, \"client\": %s, \"uid\": "
          "%u, \"pid\": %u, \"buffers\": %u, \"streams\": %u, "
          "\"kernels\": %u, \"buffer_bytes\": %u}",
          s.id(), JsonString(s.tenant()), JsonString(s.client_name()), s.uid(),
          s.pid(), s.buffers(), s.streams(), s.kernels(), s.buffer_bytes());
    }
    std::printf("%s]\n", out.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TENANT", "UID", "PID", "BUFFERS", "STREAMS", "BYTES", "CLIENT"}};
  for (const auto& s : response.sessions()) {
    rows.push_back({absl::StrFormat("%016x", s.id()), s.tenant(),
                    absl::StrCat(s.uid()), absl::StrCat(s.pid()),
                    absl::StrCat(s.buffers()), absl::StrCat(s.streams()),
                    hrx::shared::FormatBytes(s.buffer_bytes()), s.client_name()});
  }
  PrintTable(rows);
  return kExitOk;
}

int Usage(const char* text, const std::string& error);

int BudgetSet(const std::string& socket_path,
              const std::vector<std::string>& args) {
  if (args.size() < 2) {
    return Usage(kUsage, "budget set: name a tenant and at least one FIELD=VALUE");
  }
  // Start from the tenant's current budget, so unnamed fields keep theirs.
  hrx::v1::Budget budget;
  {
    grpc::ClientContext context;
    auto stub = ConnectAdmin(socket_path, context);
    hrx::v1::ListTenantsResponse tenants;
    const grpc::Status status =
        stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), &tenants);
    if (!status.ok()) {
      return Fail(hrx::client::internal::CallStatus(status, socket_path));
    }
    for (const auto& t : tenants.tenants()) {
      if (t.name() == args[0]) budget = t.budget();
    }
  }
  const auto* descriptor = hrx::v1::Budget::descriptor();
  const auto* reflection = hrx::v1::Budget::GetReflection();
  for (size_t i = 1; i < args.size(); ++i) {
    std::vector<std::string> parts = absl::StrSplit(args[i], absl::MaxSplits('=', 1));
    const auto* field = parts.size() == 2 ? descriptor->FindFieldByName(parts[0])
                                          : nullptr;
    uint64_t value = 0;
    if (field == nullptr ||
        (parts[1] != "unlimited" && !absl::SimpleAtoi(parts[1], &value))) {
      return Usage(kUsage, absl::StrCat("budget set: cannot read ", args[i]));
    }
    if (parts[1] == "unlimited") {
      reflection->ClearField(&budget, field);
    } else {
      reflection->SetUInt64(&budget, field, value);
    }
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(socket_path, context);
  hrx::v1::SetBudgetRequest request;
  request.set_tenant(args[0]);
  *request.mutable_budget() = budget;
  hrx::v1::SetBudgetResponse response;
  const grpc::Status status = stub->SetBudget(&context, request, &response);
  if (!status.ok()) {
    return Fail(hrx::client::internal::CallStatus(status, socket_path));
  }
  std::printf("budget of tenant %s set\n", args[0].c_str());
  return kExitOk;
}

int Evict(const std::string& socket_path, const std::vector<std::string>& args) {
  uint64_t id = 0;
  if (args.size() != 1 || !absl::SimpleHexAtoi(args[0], &id)) {
    return Usage(kUsage, "evict: pass one session id (hex, from hrxctl sessions)");
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(socket_path, context);
  hrx::v1::EvictSessionRequest request;
  request.set_id(id);
  hrx::v1::EvictSessionResponse response;
  const grpc::Status status = stub->EvictSession(&context, request, &response);
  if (!status.ok()) {
    return Fail(hrx::client::internal::CallStatus(status, socket_path));
  }
  std::printf("session %016lx evicted: %lu buffers, %lu streams freed\n",
              static_cast<unsigned long>(id),
              static_cast<unsigned long>(response.freed_buffers()),
              static_cast<unsigned long>(response.freed_streams()));
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
  bool json = false;
  std::string tenant;
  std::vector<std::string> positional;
  for (const std::string& arg : rest) {
    if (arg == "--json") {
      json = true;
    } else if (arg.rfind("--tenant=", 0) == 0) {
      tenant = arg.substr(9);
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    } else if (arg.rfind("--", 0) == 0) {
      return Usage(kUsage, absl::StrCat(command, ": unknown option ", arg));
    } else {
      positional.push_back(arg);
    }
  }
  if (command == "tenants" && positional.empty()) return Tenants(socket_path, json);
  if (command == "sessions" && positional.empty()) {
    return Sessions(socket_path, tenant, json);
  }
  if (command == "budget" && !positional.empty() && positional[0] == "set") {
    return BudgetSet(socket_path,
                     std::vector<std::string>(positional.begin() + 1,
                                              positional.end()));
  }
  if (command == "evict") return Evict(socket_path, positional);
  return Usage(kUsage, absl::StrCat("unknown command ", command));
}
