// An opt-in Prometheus text endpoint (--metrics_listen=HOST:PORT, loopback
// by default in docs): GET /metrics answers with gauges and counters for
// sessions, streams, commands, the caches and pools, refusals by reason and
// (with --metrics_tenants only: they tell tenants about each other) each
// tenant's usage and budget. Anything else is 404. Many connections at once,
// each with a whole-exchange deadline (kMetricsDeadline).
#ifndef HRX_DAEMON_METRICS_H_
#define HRX_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/core.h"
#include "daemon/server/exchange_server.h"

namespace hrx::daemon {

inline constexpr absl::Duration kMetricsDeadline = absl::Seconds(2);
inline constexpr size_t kMaxMetricsConnections = 64;

// The exposition text for the core's current state; per-tenant series only
// with `per_tenant`.
std::string RenderMetrics(Core& core, bool per_tenant);

class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, Core& core, bool per_tenant);

 private:
  MetricsServer(Core& core, bool per_tenant)
      : core_(core), per_tenant_(per_tenant) {}
  std::string Answer(const std::string& request);

  Core& core_;
  const bool per_tenant_;
  std::unique_ptr<ExchangeServer> server_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_METRICS_H_
