#include "daemon/run.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_format.h"
#include "daemon/backend/factory.h"
#include "daemon/core/core.h"
#include "daemon/core/tenants.h"
#include "daemon/logging.h"
#include "daemon/server/server.h"
#include "daemon/socket_guard.h"
#include "shared/bytes.h"
#include "shared/socket_path.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

// How long calls in progress get to finish at shutdown before cancellation.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

int WaitForStopSignal(const sigset_t& signals) {
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) != 0) {
  }
  return signal_number;
}

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    const std::string& flag) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tls_file_unreadable: --%s=%s cannot be read. Fix: pass a readable "
        "PEM file.",
        flag, path));
  }
  return text.str();
}

absl::StatusOr<RemoteListener> ReadRemoteListener(
    const DaemonOptions& options) {
  if (options.tls_cert_path.empty() || options.tls_key_path.empty() ||
      options.tls_client_ca_path.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tls_required: --listen=%s: remote access needs TLS with client "
        "certificates. Fix: also pass --tls_cert, --tls_key and "
        "--tls_client_ca, or drop --listen.",
        options.listen_address));
  }
  RemoteListener remote;
  remote.address = options.listen_address;
  HRX_ASSIGN_OR_RETURN(remote.cert_pem,
                       ReadPem(options.tls_cert_path, "tls_cert"));
  HRX_ASSIGN_OR_RETURN(remote.key_pem, ReadPem(options.tls_key_path, "tls_key"));
  HRX_ASSIGN_OR_RETURN(remote.client_ca_pem,
                       ReadPem(options.tls_client_ca_path, "tls_client_ca"));
  return remote;
}

}  // namespace

absl::Status Run(const DaemonOptions& options) {
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  HRX_RETURN_IF_ERROR(InitLogging(options.log_level));
  auto log = Logger("daemon");
  if (options.queue_count == 0) {
    return absl::InvalidArgumentError(
        "bad_queue_count: --queue_count=0: the queue pool needs at least one "
        "queue. Fix: pass a positive --queue_count (default 8).");
  }
  const std::string socket_path = options.socket_path.empty()
                                      ? shared::DefaultSocketPath()
                                      : options.socket_path;
  std::shared_ptr<TenantRegistry> tenants;
  if (options.config_path.empty()) {
    tenants = TenantRegistry::BuiltIn(geteuid());
    log->info("no --config: uid {} is admin tenant \"local\", everyone else "
              "tenant \"default\", no budgets",
              geteuid());
  } else {
    HRX_ASSIGN_OR_RETURN(tenants, TenantRegistry::Load(options.config_path));
  }
  std::optional<RemoteListener> remote;
  if (!options.listen_address.empty()) {
    HRX_ASSIGN_OR_RETURN(remote, ReadRemoteListener(options));
  }
  HRX_ASSIGN_OR_RETURN(std::unique_ptr<SocketGuard> guard,
                       SocketGuard::Claim(socket_path, options.socket_mode));

  auto backend_log = Logger("backend");
  HRX_ASSIGN_OR_RETURN(
      std::unique_ptr<backend::Backend> backend,
      backend::OpenBackend({options.backend, options.cpu_memory_bytes},
                           *backend_log));
  const backend::DeviceProperties properties = backend->properties();
  CoreOptions core_options;
  core_options.queue_count = options.queue_count;
  core_options.tenants = std::move(tenants);
  core_options.ticket_lifetime = absl::Milliseconds(options.ticket_lifetime_ms);
  auto core = std::make_unique<Core>(std::move(backend), core_options);
  HRX_ASSIGN_OR_RETURN(std::unique_ptr<DaemonServer> server,
                       DaemonServer::Start(*core, socket_path,
                                           options.socket_mode, remote));
  if (remote) {
    log->info("also listening on {} (TLS, client certificates required)",
              remote->address);
  }

  log->info("hrxd listening on unix:{} (backend {}, device \"{}\", target {}, "
            "{} of device memory, {} queues)",
            socket_path, properties.backend, properties.name,
            properties.target, shared::FormatBytes(properties.memory_bytes),
            options.queue_count);
  std::printf("hrxd is listening on %s\ntry:  bazel-bin/client/hrxctl "
              "--socket=%s status\n",
              socket_path.c_str(), socket_path.c_str());
  std::fflush(stdout);

  const int signal_number = WaitForStopSignal(stop_signals);
  log->info("received {}: no longer accepting calls, draining queued work",
            signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  server->Shutdown(kShutdownGrace);
  core->Drain();
  server.reset();
  core.reset();
  guard.reset();
  log->info("stopped cleanly");
  return absl::OkStatus();
}

}  // namespace hrx::daemon
