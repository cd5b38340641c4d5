// An opt-in Prometheus text endpoint (--metrics_listen=HOST:PORT, loopback
// by default in docs): GET /metrics answers with gauges and counters for
// sessions, streams, commands, bytes per tenant, the caches and pools, and
// refusals by reason. Anything else is 404. One connection at a time.
#ifndef HRX_DAEMON_METRICS_H_
#define HRX_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/core.h"
#include "daemon/server/acceptor.h"

namespace hrx::daemon {

// The exposition text for the core's current state.
std::string RenderMetrics(Core& core);

class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, Core& core);

 private:
  explicit MetricsServer(Core& core) : core_(core) {}
  void Answer(int fd);

  Core& core_;
  std::unique_ptr<Acceptor> acceptor_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_METRICS_H_
