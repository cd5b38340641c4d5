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
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/hrxctl/output.h"
#include "client/hrxctl/target.h"
#include "client/internal/connection.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/status.grpc.pb.h"
#include "shared/bytes.h"
#include "shared/socket_path.h"

namespace {

using hrxctl::ConnectAdmin;
using hrxctl::Fail;
using hrxctl::FieldsJson;
using hrxctl::JsonString;
using hrxctl::kExitOk;
using hrxctl::kExitUsage;
using hrxctl::PrintTable;
using hrxctl::Usage;

constexpr char kUsage[] =
    "usage: hrxctl [target] <command> [options]\n"
    "\n"
    "commands:\n"
    "  status [--json]   backend, target, device memory, queues, sessions,\n"
    "                    bytes in use, cache and pool counters\n"
    "  tenants [--json]  each tenant's role, sessions, and use against budget\n"
    "  sessions [--tenant=NAME] [--json]\n"
    "                    open sessions: tenant, uid, pid, buffers, streams\n"
    "  budget set TENANT FIELD=VALUE...   (admin) replace budget fields:\n"
    "                    device_bytes, shared_bytes, streams, kernels, "
    "graphs,\n"
    "                    inflight_commands; VALUE is a number or unlimited\n"
    "  evict SESSION_ID  (admin) close a session as if its client had exited\n"
    "  buffers [--tenant=NAME] [--session=ID] [--json]\n"
    "                    live buffers, by session and tenant\n"
    "  executors [--json] the processes tenants' device work runs in\n"
    "  bound [list|create|label|remove] [--json]\n"
    "                    socket-bound tenants (one per Kubernetes container)\n"
    "                    and the pod each belongs to\n"
    "  health            exit 0 when hrxd's health service says SERVING\n"
    "  top [--interval=MS] [--json]\n"
    "                    a live view of status and tenants; q quits\n"
    "\n"
    "target (before the command):\n"
    "  --socket=PATH     daemon socket (default: $HRXD_SOCKET, else the\n"
    "                    per-user default)\n"
    "  --remote=HOST:PORT --tls_cert=PEM --tls_key=PEM --tls_ca=PEM\n"
    "                    a remote daemon, over TLS with a client certificate\n"
    "  every command takes --help\n"
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
          "\"device_memory_bytes\": %u, \"integrated\": %s, "
          "\"queue_count\": %u, "
          "\"queues_created\": %u, \"version\": %s, \"pid\": %u, "
          "\"uptime_seconds\": %u, \"sessions\": %u, \"streams\": %u, "
          "\"buffers\": %u, \"kernels\": %u, \"events\": %u, "
          "\"bytes_in_use\": %u, \"commands_submitted\": %u, "
          "\"dispatch_cache\": %s, \"transfer_cache\": %s, "
          "\"allocation_pool\": %s, \"staging_pool\": %s, "
          "\"upload_staging\": %s, \"handle_kinds\": [%s]}\n",
          JsonString(d.backend()), JsonString(d.name()), JsonString(d.target()),
          d.memory_bytes(), d.integrated() ? "true" : "false", d.queue_count(),
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
      {"device memory",
       absl::StrCat(hrx::shared::FormatBytes(d.memory_bytes()),
                    d.integrated() ? " (integrated: every buffer maps)" : "")},
      {"queues",
       absl::StrCat(d.queue_count(), " (", s.queues_created(), " created)")},
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

int Status(const hrxctl::Target& target, bool json) {
  auto channel = target.Channel();
  auto stub = hrx::v1::DaemonStatus::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  hrx::v1::GetStatusRequest request;
  hrx::v1::GetStatusResponse response;
  const grpc::Status status = stub->GetStatus(&context, request, &response);
  if (!status.ok()) {
    return Fail(target.Check(status));
  }
  if (json) {
    PrintStatusJson(response);
  } else {
    PrintStatusTable(response);
  }
  return kExitOk;
}

std::string Limit(bool has, uint64_t value, bool bytes) {
  if (!has) return "unlimited";
  return bytes ? hrx::shared::FormatBytes(value) : absl::StrCat(value);
}

std::string UsageJson(const hrx::v1::Usage& usage) { return FieldsJson(usage); }
std::string BudgetJson(const hrx::v1::Budget& budget) {
  return FieldsJson(budget);
}

std::string LimitJson(bool has, uint64_t value) {
  return has ? absl::StrCat(value) : "null";
}

int Tenants(const hrxctl::Target& target, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::ListTenantsResponse response;
  const grpc::Status status =
      stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response);
  if (!status.ok()) {
    return Fail(target.Check(status));
  }
  if (json) {
    std::string out = "[";
    for (const auto& t : response.tenants()) {
      if (out.size() > 1) out += ", ";
      out += absl::StrFormat(
          "{\"name\": %s, \"role\": %s, \"sessions\": %u, \"usage\": %s, "
          "\"budget\": %s, \"load_kernels\": %s, \"detached_exports\": %u, "
          "\"detached_export_bytes\": %u}",
          JsonString(t.name()), JsonString(hrx::v1::Role_Name(t.role())),
          t.sessions(), UsageJson(t.usage()), BudgetJson(t.budget()),
          t.load_kernels() ? "true" : "false", t.detached_exports(),
          t.detached_export_bytes());
    }
    std::printf("%s]\n", out.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TENANT", "ROLE", "SESSIONS", "DEVICE", "SHARED", "STREAMS", "KERNELS",
       "INFLIGHT", "BUFFERS", "EXPORTS", "CONNECTIONS", "DETACHED"}};
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
             Limit(b.has_inflight_commands(), b.inflight_commands(), false),
         absl::StrCat(u.buffers()) + " / " +
             Limit(b.has_buffers(), b.buffers(), false),
         absl::StrCat(u.exports()) + " / " +
             Limit(b.has_exports(), b.exports(), false),
         absl::StrCat(u.connections()) + " / " +
             Limit(b.has_connections(), b.connections(), false),
         t.detached_exports() == 0
             ? std::string("-")
             : absl::StrCat(t.detached_exports(), " (",
                            hrx::shared::FormatBytes(t.detached_export_bytes()),
                            ")")});
  }
  PrintTable(rows);
  return kExitOk;
}

int Sessions(const hrxctl::Target& target, const std::string& tenant,
             bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::ListSessionsRequest request;
  request.set_tenant(tenant);
  hrx::v1::ListSessionsResponse response;
  const grpc::Status status = stub->ListSessions(&context, request, &response);
  if (!status.ok()) {
    return Fail(target.Check(status));
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
                    hrx::shared::FormatBytes(s.buffer_bytes()),
                    s.client_name()});
  }
  PrintTable(rows);
  return kExitOk;
}

int Executors(const hrxctl::Target& target, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::ListExecutorsResponse response;
  const grpc::Status status =
      stub->ListExecutors(&context, hrx::v1::ListExecutorsRequest(), &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (json) {
    std::string out = "[";
    for (const auto& e : response.executors()) {
      if (out.size() > 1) out += ", ";
      std::string tenants = "[";
      for (const std::string& tenant : e.tenants()) {
        if (tenants.size() > 1) tenants += ", ";
        tenants += JsonString(tenant);
      }
      out += absl::StrFormat(
          "{\"name\": %s, \"pid\": %u, \"running\": %s, \"restarts\": "
          "%u, \"bytes_in_use\": %u, \"tenants\": %s], \"last_loss\": %s}",
          JsonString(e.name()), e.pid(), e.running() ? "true" : "false",
          e.restarts(), e.bytes_in_use(), tenants, JsonString(e.last_loss()));
    }
    std::printf("%s]\n", out.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"EXECUTOR", "PID", "STATE",
                                                 "RESTARTS", "MEMORY",
                                                 "TENANTS", "LAST LOSS"}};
  for (const auto& e : response.executors()) {
    std::string tenants;
    for (const std::string& tenant : e.tenants()) {
      absl::StrAppend(&tenants, tenants.empty() ? "" : ",", tenant);
    }
    rows.push_back({e.name(), e.pid() != 0 ? absl::StrCat(e.pid()) : "-",
                    e.running() ? "running" : "down",
                    absl::StrCat(e.restarts()),
                    hrx::shared::FormatBytes(e.bytes_in_use()),
                    tenants.empty() ? "-" : tenants,
                    e.last_loss().empty() ? "-" : e.last_loss()});
  }
  PrintTable(rows);
  return kExitOk;
}

int BudgetSet(const hrxctl::Target& target,
              const std::vector<std::string>& args, bool json) {
  if (args.size() < 2) {
    return Usage(kUsage,
                 "budget set: name a tenant and at least one FIELD=VALUE");
  }
  // Start from the tenant's current budget, so unnamed fields keep theirs.
  hrx::v1::Budget budget;
  {
    grpc::ClientContext context;
    auto stub = ConnectAdmin(target, context);
    hrx::v1::ListTenantsResponse tenants;
    const grpc::Status status =
        stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), &tenants);
    if (!status.ok()) {
      return Fail(target.Check(status));
    }
    for (const auto& t : tenants.tenants()) {
      if (t.name() == args[0]) budget = t.budget();
    }
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (!hrxctl::ApplyBudgetField(args[i], &budget)) {
      return Usage(kUsage, absl::StrCat("budget set: cannot read ", args[i]));
    }
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::SetBudgetRequest request;
  request.set_tenant(args[0]);
  *request.mutable_budget() = budget;
  hrx::v1::SetBudgetResponse response;
  const grpc::Status status = stub->SetBudget(&context, request, &response);
  if (!status.ok()) {
    return Fail(target.Check(status));
  }
  if (json) {
    std::printf(
        "{\"tenant\": %s, \"budget\": {\"device_bytes\": %s, "
        "\"shared_bytes\": %s, \"streams\": %s, \"kernels\": %s, "
        "\"graphs\": %s, \"inflight_commands\": %s}}\n",
        JsonString(args[0]).c_str(),
        LimitJson(budget.has_device_bytes(), budget.device_bytes()).c_str(),
        LimitJson(budget.has_shared_bytes(), budget.shared_bytes()).c_str(),
        LimitJson(budget.has_streams(), budget.streams()).c_str(),
        LimitJson(budget.has_kernels(), budget.kernels()).c_str(),
        LimitJson(budget.has_graphs(), budget.graphs()).c_str(),
        LimitJson(budget.has_inflight_commands(), budget.inflight_commands())
            .c_str());
  } else {
    std::printf("budget of tenant %s set\n", args[0].c_str());
  }
  return kExitOk;
}

int Evict(const hrxctl::Target& target, const std::vector<std::string>& args,
          bool json) {
  uint64_t id = 0;
  if (args.size() != 1 || !absl::SimpleHexAtoi(args[0], &id)) {
    return Usage(kUsage,
                 "evict: pass one session id (hex, from hrxctl sessions)");
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::EvictSessionRequest request;
  request.set_id(id);
  hrx::v1::EvictSessionResponse response;
  const grpc::Status status = stub->EvictSession(&context, request, &response);
  if (!status.ok()) {
    return Fail(target.Check(status));
  }
  if (json) {
    std::printf(
        "{\"evicted\": \"%016lx\", \"freed_buffers\": %lu, "
        "\"freed_streams\": %lu}\n",
        static_cast<unsigned long>(id),
        static_cast<unsigned long>(response.freed_buffers()),
        static_cast<unsigned long>(response.freed_streams()));
    return kExitOk;
  }
  std::printf("session %016lx evicted: %lu buffers, %lu streams freed\n",
              static_cast<unsigned long>(id),
              static_cast<unsigned long>(response.freed_buffers()),
              static_cast<unsigned long>(response.freed_streams()));
  return kExitOk;
}

int Buffers(const hrxctl::Target& target, const std::string& tenant,
            uint64_t session, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::ListBuffersRequest request;
  request.set_tenant(tenant);
  request.set_session(session);
  hrx::v1::ListBuffersResponse response;
  const grpc::Status status = stub->ListBuffers(&context, request, &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (json) {
    std::string out = "[";
    for (const auto& b : response.buffers()) {
      if (out.size() > 1) out += ", ";
      out += absl::StrFormat(
          "{\"session\": \"%016x\", \"tenant\": %s, \"buffer\": \"%016x\", "
          "\"bytes\": %u, \"allocation_id\": %u, \"shared\": %s}",
          b.session(), JsonString(b.tenant()), b.handle(), b.bytes(),
          b.allocation_id(), b.shared() ? "true" : "false");
    }
    std::printf("%s]\n", out.c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"SESSION", "TENANT", "BUFFER", "BYTES", "ALLOCATION", "KIND"}};
  for (const auto& b : response.buffers()) {
    rows.push_back({absl::StrFormat("%016x", b.session()), b.tenant(),
                    absl::StrFormat("%016x", b.handle()),
                    hrx::shared::FormatBytes(b.bytes()),
                    absl::StrCat(b.allocation_id()),
                    b.shared() ? "shared" : "device"});
  }
  PrintTable(rows);
  return kExitOk;
}

}  // namespace

namespace hrxctl {

// For `top`: one status screen (tables) or one JSON line.
int StatusOnce(const Target& target, bool json) { return Status(target, json); }
int TenantsOnce(const Target& target, bool json) {
  return Tenants(target, json);
}

}  // namespace hrxctl

namespace {

struct Help {
  const char* command;
  const char* text;
};

constexpr Help kHelp[] = {
    {"status", kStatusUsage},
    {"tenants",
     "usage: hrxctl [target] tenants [--json]\n\nEach tenant's role, open "
     "sessions, and use against its budget (device and shared bytes, "
     "streams, kernels, in-flight commands). Observers and admins.\n"},
    {"sessions",
     "usage: hrxctl [target] sessions [--tenant=NAME] [--json]\n\nOpen "
     "sessions: id (for evict), tenant, uid, pid, buffers, streams, bytes, "
     "client name. Observers and admins.\n"},
    {"buffers",
     "usage: hrxctl [target] buffers [--tenant=NAME] [--session=ID] "
     "[--json]\n\nLive buffers: session, tenant, handle, size, allocation "
     "id, device or shared. Observers and admins.\n"},
    {"budget",
     "usage: hrxctl [target] budget set TENANT FIELD=VALUE...\n\nReplaces the "
     "named fields of a tenant's budget, live (admins). FIELD is "
     "device_bytes, shared_bytes, streams, kernels, graphs or "
     "inflight_commands; VALUE a number or unlimited. Lowering a budget "
     "below use refuses new reservations and frees nothing.\n"},
    {"evict",
     "usage: hrxctl [target] evict SESSION_ID\n\nCloses a session (admins): "
     "its queued work drains, then its buffers, streams and budget are "
     "released. SESSION_ID is hex, from hrxctl sessions.\n"},
    {"executors",
     "usage: hrxctl [target] executors [--json]\n\nThe executor processes "
     "tenants' device work runs in: name (tenant or shared), pid, state, "
     "restarts, memory, tenants served, why it last went down. Observers "
     "and admins.\n"},
    {"bound", nullptr},
    {"health",
     "usage: hrxctl [target] health\n\nAsks hrxd's standard gRPC health "
     "service; exits 0 and prints serving when it is SERVING, 3 when it is "
     "not (hrxd is stopping), 4 when nothing answers. For readiness and "
     "liveness probes.\n"},
    {"top",
     "usage: hrxctl [target] top [--interval=MS] [--json]\n\nA live view of "
     "status and tenants, refreshed every MS milliseconds (default 1000); q "
     "quits. With --json, one status object per line per refresh.\n"},
};

}  // namespace

namespace hrxctl {
int Top(const Target& target, int interval_ms, bool json);
// bound.cc
const char* BoundUsage();
int Bound(const Target& target, const std::vector<std::string>& args,
          bool json);
int Health(const Target& target);
}  // namespace hrxctl

int main(int argc, char** argv) {
  hrxctl::Target target;
  std::string command;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto take = [&](const char* name, std::string* into) {
      const std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0) {
        *into = arg.substr(prefix.size());
        return true;
      }
      if (arg == name && i + 1 < argc) {
        *into = argv[++i];
        return true;
      }
      return false;
    };
    if (!command.empty()) {
      rest.push_back(arg);
    } else if (take("--socket", &target.socket_path) ||
               take("--remote", &target.remote) ||
               take("--tls_cert", &target.tls_cert) ||
               take("--tls_key", &target.tls_key) ||
               take("--tls_ca", &target.tls_ca)) {
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    } else if (arg.rfind("-", 0) != 0) {
      command = arg;
    } else {
      return Usage(kUsage, absl::StrCat("unknown option ", arg));
    }
  }
  if (command.empty()) return Usage(kUsage, "no command given");
  if (!target.remote.empty() &&
      (target.tls_cert.empty() || target.tls_key.empty() ||
       target.tls_ca.empty())) {
    return Usage(kUsage,
                 "--remote needs --tls_cert, --tls_key and --tls_ca (the "
                 "daemon accepts only TLS with client certificates)");
  }
  target.socket_path = hrx::shared::ResolveClientSocketPath(target.socket_path);
  if (target.remote.empty()) {
    // Never trust a socket someone else could have planted.
    if (absl::Status trusted =
            hrx::shared::CheckTrustedSocket(target.socket_path);
        !trusted.ok()) {
      return Fail(trusted);
    }
  }
  const char* help = nullptr;
  bool known = false;
  for (const Help& entry : kHelp) {
    if (command == entry.command) {
      known = true;
      help = entry.text != nullptr ? entry.text : hrxctl::BoundUsage();
    }
  }
  if (!known) return Usage(kUsage, absl::StrCat("unknown command ", command));
  bool json = false;
  std::string tenant;
  uint64_t session = 0;
  int interval_ms = 1000;
  std::vector<std::string> positional;
  for (const std::string& arg : rest) {
    if (arg == "--json") {
      json = true;
    } else if (arg.rfind("--tenant=", 0) == 0) {
      tenant = arg.substr(9);
    } else if (arg.rfind("--session=", 0) == 0 &&
               absl::SimpleHexAtoi(arg.substr(10), &session)) {
    } else if (arg.rfind("--interval=", 0) == 0 &&
               absl::SimpleAtoi(arg.substr(11), &interval_ms) &&
               interval_ms > 0) {
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(help, stdout);
      return kExitOk;
    } else if (arg.rfind("--", 0) == 0) {
      return Usage(help, absl::StrCat(command, ": unknown option ", arg));
    } else {
      positional.push_back(arg);
    }
  }
  const bool bare = positional.empty();
  if (command == "status" && bare) return Status(target, json);
  if (command == "tenants" && bare) return Tenants(target, json);
  if (command == "sessions" && bare) return Sessions(target, tenant, json);
  if (command == "buffers" && bare)
    return Buffers(target, tenant, session, json);
  if (command == "top" && bare) return hrxctl::Top(target, interval_ms, json);
  if (command == "executors" && bare) return Executors(target, json);
  if (command == "budget" && !bare && positional[0] == "set") {
    return BudgetSet(
        target,
        std::vector<std::string>(positional.begin() + 1, positional.end()),
        json);
  }
  if (command == "evict") return Evict(target, positional, json);
  if (command == "bound") return hrxctl::Bound(target, positional, json);
  if (command == "health" && bare) return hrxctl::Health(target);
  return Usage(help, absl::StrCat(command, ": unexpected arguments"));
}
