// An opt-in Prometheus text endpoint (--metrics_listen=HOST:PORT, loopback
// by default in docs): GET /metrics answers with gauges and counters for
// sessions, streams, commands, bytes per tenant, the caches and pools, and
// refusals by reason. Anything else is 404. One connection at a time.
#ifndef HRX_DAEMON_METRICS_H_
#define HRX_DAEMON_METRICS_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/core/core.h"

namespace hrx::daemon {

// The exposition text for the core's current state.
std::string RenderMetrics(Core& core);

class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, Core& core);
  ~MetricsServer();

 private:
  MetricsServer(int listen_fd, int wake_fd, Core& core);
  void Loop();

  const int listen_fd_;
  const int wake_fd_;
  Core& core_;
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_METRICS_H_
