// hrxd's life: claim the socket (or take the one systemd passed), open the
// backend, serve — reloading tenants on SIGHUP, reporting to systemd — until
// SIGINT or SIGTERM, then stop accepting, drain queued work and clean up.
#ifndef HRX_DAEMON_RUN_H_
#define HRX_DAEMON_RUN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/executor/uid_leases.h"
#include "daemon/server/call_pacer.h"

namespace hrx::daemon {

struct DaemonOptions {
  std::string socket_path;       // empty: shared::DefaultSocketPath()
  std::string backend = "auto";  // auto, cpu or hip
  std::string log_level = "info";
  uint64_t cpu_memory_bytes = 0;  // 0: half of physical memory
  int gpu_device = 0;             // the HIP runtime's device ordinal
  // Stop (exit 1, for systemd to restart hrxd) once the device is lost.
  bool exit_on_device_loss = false;
  uint32_t queue_count = 8;            // size of the native queue pool
  std::string config_path;             // tenants and budgets; empty: built-in
  int64_t ticket_lifetime_ms = 10000;  // export tickets stay redeemable
  int64_t remote_session_lease_ms = 120000;  // see kRemoteSessionLeaseSeconds
  // SIGTERM: half for calls in progress, half for queued work; then exit.
  int64_t stop_timeout_ms = 20000;
  unsigned socket_mode = 0660;  // others' bits open the directory too
  // Remote access: all four or none (the daemon refuses TCP without TLS).
  std::string listen_address;  // HOST:PORT
  std::string tls_cert_path, tls_key_path, tls_client_ca_path;
  // Prometheus text metrics over HTTP on HOST:PORT; empty: off.
  std::string metrics_address;
  // Per-tenant series in the metrics (they tell tenants about each other).
  bool metrics_tenants = false;
  // Tenants' device work runs in executor processes (daemon/executor); off,
  // it runs inside hrxd (kernels included).
  bool executors = true;
  // Rings of tenants whose work runs in an executor are served there (the
  // direct data plane, being built: docs/architecture.md, "Executors").
  bool executor_rings = true;
  std::string executor_user = "nobody";  // when hrxd runs as root
  // First of the uids executors get one each of (hrxd as root; 0: none).
  uint32_t executor_uid_base = 2147352576;
  // Where root hrxds lease those uids, so that no two give one out at once
  // (executor/uid_leases.h).
  std::string executor_uid_lease_file = executor::kDefaultUidLeaseFile;
  int64_t executor_watchdog_ms = 30000;  // no progress this long: killed
  int64_t executor_hang_ms = 10000;      // no ping answer this long: killed
  // Each tenant's unary calls a second (call_pacer.h); 0: unpaced.
  double tenant_calls_per_second = kDefaultTenantCallsPerSecond;
  // Each executor in a control group of its own (ExecutorCgroups).
  bool executor_cgroups = true;
  uint64_t executor_memory_bytes = 0;  // a tenant's own; 0: a quarter
  // Every tenant's own executor together; 0: half of memory.
  uint64_t tenant_executors_memory_bytes = 0;
  // Where socket-bound tenants' directories go; empty: "tenants" beside the
  // main socket. docs/kubernetes.md.
  std::string tenant_socket_dir;
  uint64_t max_bound_tenants = 256;  // kDefaultMaxBoundTenants
};

// The open-file limit hrxd warns below (the shipped unit sets it).
inline constexpr uint64_t kRecommendedOpenFiles = 65536;

// Blocks until a stop signal; OK after a clean shutdown. Must be called
// before the process starts other threads (it blocks the stop signals in
// the calling thread so every thread it starts inherits the mask).
absl::Status Run(const DaemonOptions& options);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_RUN_H_
