#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

void Gauge(std::string& out, const char* name, const char* help,
           uint64_t value) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name,
                  " gauge\n", name, " ", value, "\n");
}

void Counter(std::string& out, const char* name, const char* help,
             uint64_t value) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name,
                  " counter\n", name, " ", value, "\n");
}

std::string Escape(const std::string& label) {
  std::string out;
  for (char c : label) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

static void AppendTenants(Core& core, std::string& out);
static void AppendRefusals(Core& core, std::string& out);

std::string RenderMetrics(Core& core, bool per_tenant) {
  const CoreStatus s = core.admin().status();
  std::string out;
  Gauge(out, "hrxd_sessions", "Open sessions.", s.sessions);
  Gauge(out, "hrxd_streams", "Live streams.", s.streams);
  Gauge(out, "hrxd_buffers", "Live buffer handles.", s.buffers);
  Gauge(out, "hrxd_kernels", "Loaded kernels.", s.kernels);
  Gauge(out, "hrxd_bytes_in_use", "Device bytes held by allocations.",
        s.bytes_in_use);
  Gauge(out, "hrxd_device_memory_bytes",
        "Device memory the daemon may hand out.", s.device.memory_bytes);
  Counter(out, "hrxd_commands_submitted_total", "Commands enqueued.",
          s.commands_submitted);
  const std::pair<const char*, StoreStats> caches[] = {
      {"dispatch", s.dispatch_cache},
      {"transfer", s.transfer_cache},
      {"allocation_pool", s.allocation_pool},
      {"staging_pool", s.staging_pool},
      {"upload_staging", s.upload_staging}};
  absl::StrAppend(&out,
                  "# HELP hrxd_cache_entries Entries held by a cache or pool.\n"
                  "# TYPE hrxd_cache_entries gauge\n");
  for (const auto& [name, c] : caches) {
    absl::StrAppend(&out, "hrxd_cache_entries{cache=\"", name, "\"} ",
                    c.entries, "\n");
  }
  const std::pair<const char*, uint64_t StoreStats::*> counters[] = {
      {"hits", &StoreStats::hits},
      {"misses", &StoreStats::misses},
      {"evictions", &StoreStats::evictions}};
  for (const auto& [kind, field] : counters) {
    absl::StrAppend(&out, "# HELP hrxd_cache_", kind, "_total Cache and pool ",
                    kind, ".\n# TYPE hrxd_cache_", kind, "_total counter\n");
    for (const auto& [name, c] : caches) {
      absl::StrAppend(&out, "hrxd_cache_", kind, "_total{cache=\"", name,
                      "\"} ", c.*field, "\n");
    }
  }
  // Per-tenant figures tell one tenant about the others: only on request.
  if (per_tenant) AppendTenants(core, out);
  AppendRefusals(core, out);
  return out;
}

static void AppendTenants(Core& core, std::string& out) {
  absl::StrAppend(&out,
                  "# HELP hrxd_tenant_usage What a tenant uses, by resource.\n"
                  "# TYPE hrxd_tenant_usage gauge\n");
  std::string budgets =
      "# HELP hrxd_tenant_budget A tenant's ceiling, by resource (absent: "
      "unlimited).\n# TYPE hrxd_tenant_budget gauge\n";
  std::string sessions =
      "# HELP hrxd_tenant_sessions Open sessions by tenant.\n"
      "# TYPE hrxd_tenant_sessions gauge\n";
  for (const TenantUsage& tenant : core.admin().ListTenants()) {
    const std::string name = Escape(tenant.name);
    for (size_t r = 0; r < kResourceCount; ++r) {
      const std::string resource(ResourceName(static_cast<Resource>(r)));
      absl::StrAppend(&out, "hrxd_tenant_usage{tenant=\"", name,
                      "\",resource=\"", resource, "\"} ", tenant.usage[r],
                      "\n");
      if (tenant.limits[r]) {
        absl::StrAppend(&budgets, "hrxd_tenant_budget{tenant=\"", name,
                        "\",resource=\"", resource, "\"} ", *tenant.limits[r],
                        "\n");
      }
    }
    absl::StrAppend(&sessions, "hrxd_tenant_sessions{tenant=\"", name, "\"} ",
                    tenant.sessions, "\n");
  }
  out += budgets;
  out += sessions;
}

static void AppendRefusals(Core& core, std::string& out) {
  absl::StrAppend(&out,
                  "# HELP hrxd_refusals_total Refused calls, by reason token.\n"
                  "# TYPE hrxd_refusals_total counter\n");
  for (const auto& [reason, count] : core.refusals().counts()) {
    absl::StrAppend(&out, "hrxd_refusals_total{reason=\"", Escape(reason),
                    "\"} ", count, "\n");
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& requested, Core& core, bool per_tenant) {
  // A bare port means loopback: metrics are not for the network by default.
  const std::string address = requested.find(':') == std::string::npos
                                  ? "127.0.0.1:" + requested
                                  : requested;
  const size_t colon = address.rfind(':');
  int port = 0;
  in_addr host{};
  if (colon == std::string::npos ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &host) != 1 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return Refusal(
        Reason::kBadMetricsAddress,
        absl::StrFormat("--metrics_listen=%s is not IPV4:PORT. Fix: pass "
                        "e.g. 127.0.0.1:9464.",
                        address));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in bind_to{};
  bind_to.sin_family = AF_INET;
  bind_to.sin_port = htons(static_cast<uint16_t>(port));
  bind_to.sin_addr = host;
  if (bind(fd, reinterpret_cast<sockaddr*>(&bind_to), sizeof(bind_to)) != 0 ||
      listen(fd, 16) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return Refusal(
        Reason::kMetricsListenFailed,
        absl::StrFormat("%s: %s. Fix: pick a free port.", address, error));
  }
  auto server =
      std::unique_ptr<MetricsServer>(new MetricsServer(core, per_tenant));
  ExchangeLimits limits;
  limits.deadline = kMetricsDeadline;
  limits.max_connections = kMaxMetricsConnections;
  limits.max_request_bytes = 4096;
  auto exchange = ExchangeServer::Start(
      fd, limits,
      [](const std::string& request) {
        return request.find("\r\n\r\n") != std::string::npos ||
               request.find("\n\n") != std::string::npos;
      },
      [raw = server.get()](const std::string& request,
                           const ExchangeServer::Peer&) {
        ExchangeServer::Reply reply;
        reply.bytes = raw->Answer(request);
        return reply;
      },
      [](const std::string&) {
        return std::string(
            "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n");
      });
  if (!exchange.ok()) return exchange.status();
  server->server_ = *std::move(exchange);
  return server;
}

std::string MetricsServer::Answer(const std::string& request) {
  if (request.rfind("GET /metrics", 0) == 0) {
    const std::string body = RenderMetrics(core_, per_tenant_);
    return absl::StrCat(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
        "Content-Length: ",
        body.size(), "\r\nConnection: close\r\n\r\n", body);
  }
  return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: "
         "close\r\n\r\n";
}

}  // namespace hrx::daemon
