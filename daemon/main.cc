// hrxd: parse flags, then hand over to hrx::daemon::Run.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "daemon/executor/executor_main.h"
#include "daemon/mutex_checks.h"
#include "daemon/run.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket path (default $XDG_RUNTIME_DIR/hrxd/hrxd.sock, else "
          "/tmp/hrxd-$UID/hrxd.sock)");
ABSL_FLAG(std::string, backend, "auto", "auto, cpu or hip");
ABSL_FLAG(std::string, log_level, "info",
          "trace, debug, info, warn, error, critical or off");
ABSL_FLAG(uint64_t, cpu_memory_bytes, 0,
          "device memory of the cpu backend in bytes (0: half of RAM)");
ABSL_FLAG(int, gpu_device, 0,
          "which GPU the hip backend opens (the runtime's device ordinal)");
ABSL_FLAG(bool, exit_on_device_loss, false,
          "exit with status 1 once a fault has lost the GPU context, so that "
          "systemd restarts hrxd with a fresh one");
ABSL_FLAG(uint32_t, queue_count, 8, "size of the native queue pool");
ABSL_FLAG(std::string, config, "",
          "tenants, roles and budgets in protobuf text format (see "
          "deploy/hrxd.conf); empty: the daemon's uid is admin, no budgets");
ABSL_FLAG(int64_t, ticket_lifetime_ms, 10000,
          "how long an export ticket stays redeemable on the side channel");
ABSL_FLAG(int64_t, remote_session_lease_ms, 120000,
          "a remote (TLS) session ends this long after the last call that "
          "named it");
ABSL_FLAG(int64_t, stop_timeout_ms, 20000,
          "on SIGTERM: half of it for calls in progress to finish, the other "
          "half for queued work to drain; then hrxd exits regardless");
ABSL_FLAG(std::string, listen, "",
          "also serve remote callers on HOST:PORT, over TLS with client "
          "certificates (needs --tls_cert, --tls_key, --tls_client_ca)");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus text metrics at http://HOST:PORT/metrics (off "
          "when empty; a bare PORT means 127.0.0.1:PORT)");
ABSL_FLAG(bool, metrics_tenants, false,
          "include per-tenant usage and budgets in the metrics (anyone who "
          "can reach --metrics_listen then sees every tenant's figures)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for --listen");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --listen");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate that signs accepted client certificates");
ABSL_FLAG(bool, executors, true,
          "run tenants' device work in sandboxed executor processes (off: "
          "inside hrxd, kernels included)");
ABSL_FLAG(bool, executor_rings, true,
          "serve the rings of tenants whose work runs in an executor from "
          "that executor, so hrxd is off their per-command path (off: hrxd "
          "serves every ring and forwards its commands; see "
          "docs/architecture.md, \"Executors\")");
ABSL_FLAG(std::string, executor_user, "nobody",
          "the user executors run as when hrxd runs as root and "
          "--executor_uid_base is 0");
ABSL_FLAG(uint32_t, executor_uid_base, 2147352576,
          "when hrxd runs as root, each executor runs as a uid (and gid) of "
          "its own from this one up (65536 of them); 0: all as "
          "--executor_user");
ABSL_FLAG(std::string, executor_uid_lease_file,
          hrx::executor::kDefaultUidLeaseFile,
          "with --executor_uid_base: the file in which every root hrxd on "
          "the machine leases its executors' uids (a byte lock each), so "
          "that no two hrxds give the same uid out");
ABSL_FLAG(bool, executor_cgroups, true,
          "each executor in a control group of its own, with a task limit "
          "and --executor_memory_mb (needs root, or the unit's Delegate=; "
          "without, hrxd warns and runs executors without groups)");
ABSL_FLAG(uint64_t, executor_memory_mb, 0,
          "memory a tenant's own executor (its kernels) may use, in MiB; 0: "
          "a quarter of physical memory");
ABSL_FLAG(uint64_t, tenant_executors_memory_mb, 0,
          "memory every tenant's own executor may use together, in MiB (the "
          "kernel ends the largest past it); 0: half of physical memory");
ABSL_FLAG(int64_t, executor_watchdog_ms, 30000,
          "an executor whose work makes no progress this long is killed");
ABSL_FLAG(int64_t, executor_hang_ms, 10000,
          "an executor that does not answer hrxd's ping this long (stopped, "
          "or its main thread stuck) is killed; at most the watchdog");
ABSL_FLAG(double, tenant_calls_per_second,
          hrx::daemon::kDefaultTenantCallsPerSecond,
          "unary calls a second each tenant's calls run at, at most (a "
          "second's worth at once); faster callers wait on their own lane, "
          "so a tenant's call flood takes a bounded share of the machine; 0: "
          "unpaced");
ABSL_FLAG(std::string, socket_mode, "0660",
          "the socket's permission bits, octal (0666 lets every local user "
          "connect; identity still comes from the kernel)");

ABSL_FLAG(std::string, tenant_socket_dir, "",
          "where socket-bound tenants' socket directories are made (empty: "
          "a directory \"tenants\" beside --socket)");
ABSL_FLAG(uint64_t, max_bound_tenants, 256,
          "socket-bound tenants at once (each costs a listening socket, a "
          "side channel and two threads)");

int main(int argc, char** argv) {
  hrx::daemon::ConfigureMutexChecks();  // before any thread (hrxd's or an
                                        // executor's) starts
  // hrxd starts its executors as itself (same build, same backend).
  if (argc > 1 && std::string(argv[1]) == hrx::executor::kExecutorFlag) {
    return hrx::executor::RunExecutor(argc, argv);
  }
  absl::SetProgramUsageMessage("hrxd: the hrx GPU daemon");
  // Accept --log-level as well as --log_level.
  // Each rewritten argument keeps its own storage for the life of the
  // process (a single reused string freed the first one's bytes when the
  // flag came twice: found by AddressSanitizer).
  static std::deque<std::string> rewritten;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--log-level", 0) == 0) {
      rewritten.push_back("--log_level" + arg.substr(11));
      argv[i] = rewritten.back().data();
    }
  }
  absl::ParseCommandLine(argc, argv);
  hrx::daemon::DaemonOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.log_level = absl::GetFlag(FLAGS_log_level);
  options.cpu_memory_bytes = absl::GetFlag(FLAGS_cpu_memory_bytes);
  options.gpu_device = absl::GetFlag(FLAGS_gpu_device);
  options.exit_on_device_loss = absl::GetFlag(FLAGS_exit_on_device_loss);
  options.queue_count = absl::GetFlag(FLAGS_queue_count);
  options.config_path = absl::GetFlag(FLAGS_config);
  options.ticket_lifetime_ms = absl::GetFlag(FLAGS_ticket_lifetime_ms);
  options.remote_session_lease_ms =
      absl::GetFlag(FLAGS_remote_session_lease_ms);
  options.stop_timeout_ms = absl::GetFlag(FLAGS_stop_timeout_ms);
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.metrics_tenants = absl::GetFlag(FLAGS_metrics_tenants);
  options.executors = absl::GetFlag(FLAGS_executors);
  options.executor_rings = absl::GetFlag(FLAGS_executor_rings);
  options.executor_user = absl::GetFlag(FLAGS_executor_user);
  options.executor_uid_base = absl::GetFlag(FLAGS_executor_uid_base);
  options.executor_uid_lease_file =
      absl::GetFlag(FLAGS_executor_uid_lease_file);
  options.executor_watchdog_ms = absl::GetFlag(FLAGS_executor_watchdog_ms);
  options.executor_hang_ms = absl::GetFlag(FLAGS_executor_hang_ms);
  options.tenant_calls_per_second =
      absl::GetFlag(FLAGS_tenant_calls_per_second);
  options.executor_cgroups = absl::GetFlag(FLAGS_executor_cgroups);
  options.executor_memory_bytes = absl::GetFlag(FLAGS_executor_memory_mb) << 20;
  options.tenant_executors_memory_bytes =
      absl::GetFlag(FLAGS_tenant_executors_memory_mb) << 20;
  options.tenant_socket_dir = absl::GetFlag(FLAGS_tenant_socket_dir);
  options.max_bound_tenants = absl::GetFlag(FLAGS_max_bound_tenants);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  const std::string mode = absl::GetFlag(FLAGS_socket_mode);
  char* end = nullptr;
  options.socket_mode =
      static_cast<unsigned>(std::strtoul(mode.c_str(), &end, 8));
  if (mode.empty() || *end != '\0' || options.socket_mode > 0777) {
    std::fprintf(stderr,
                 "hrxd: bad_socket_mode: --socket_mode=%s is not an octal "
                 "mode. Fix: pass e.g. 0660 or 0666.\n",
                 mode.c_str());
    return 1;
  }
  const absl::Status status = hrx::daemon::Run(options);
  if (!status.ok()) {
    std::fprintf(stderr, "hrxd: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
