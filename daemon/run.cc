#include "daemon/run.h"

#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "daemon/backend/factory.h"
#include "daemon/core/bound_tenants.h"
#include "daemon/core/core.h"
#include "daemon/core/device_set.h"
#include "daemon/core/tenants.h"
#include "daemon/executor/executor_pool.h"
#include "daemon/logging.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/server/bound_sockets.h"
#include "daemon/server/call_lanes.h"
#include "daemon/server/server.h"
#include "daemon/socket_guard.h"
#include "shared/bytes.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
             : 0;
}

// Raises the soft open-file limit to the hard one: every buffer, export and
// connection costs a descriptor, and each is budgeted against this. Only
// when it would change anything: under the shipped unit (LimitNOFILE sets
// both) setrlimit is outside the syscall filter.
void RaiseOpenFileLimit(spdlog::logger& log) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      log.info("open-file limit raised from {} to {}", was, limit.rlim_cur);
      return;
    }
  }
  if (limit.rlim_cur < kRecommendedOpenFiles) {
    log.warn(
        "the open-file limit is {} (recommended at least {}): clients "
        "may exhaust it sooner than their budgets; set LimitNOFILE",
        limit.rlim_cur, kRecommendedOpenFiles);
  }
}

// Handled by the main loop (blocked everywhere else): stop and reload.
sigset_t HandledSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  return signals;
}

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    const std::string& flag) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return Refusal(
        Reason::kTlsFileUnreadable,
        absl::StrFormat("--%s=%s cannot be read. Fix: pass a readable "
                        "PEM file.",
                        flag, path));
  }
  return text.str();
}

absl::StatusOr<RemoteListener> ReadRemoteListener(
    const DaemonOptions& options) {
  if (options.tls_cert_path.empty() || options.tls_key_path.empty() ||
      options.tls_client_ca_path.empty()) {
    return Refusal(Reason::kTlsRequired,
                   absl::StrFormat(
                       "--listen=%s: remote access needs TLS with client "
                       "certificates. Fix: also pass --tls_cert, --tls_key and "
                       "--tls_client_ca, or drop --listen.",
                       options.listen_address));
  }
  RemoteListener remote;
  remote.address = options.listen_address;
  HRX_ASSIGN_OR_RETURN(remote.cert_pem,
                       ReadPem(options.tls_cert_path, "tls_cert"));
  HRX_ASSIGN_OR_RETURN(remote.key_pem,
                       ReadPem(options.tls_key_path, "tls_key"));
  HRX_ASSIGN_OR_RETURN(remote.client_ca_pem,
                       ReadPem(options.tls_client_ca_path, "tls_client_ca"));
  return remote;
}

// The socket systemd passed (socket activation), if any, and its path.
struct Activation {
  int fd = -1;
  std::string path;
};

Activation InheritedSocket() {
  Activation activation;
  if (sd_listen_fds(/*unset_environment=*/1) != 1) return activation;
  const int fd = SD_LISTEN_FDS_START;
  if (sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) <= 0) {
    return activation;
  }
  sockaddr_un address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return activation;
  }
  activation.fd = fd;
  activation.path = address.sun_path;
  return activation;
}

// How to run hrxctl beside this hrxd: from a Bazel tree its build output,
// installed (the .deb, make install) the one on PATH.
std::string HrxctlHint() {
  std::error_code error;
  const std::string self =
      std::filesystem::read_symlink("/proc/self/exe", error).string();
  const bool built_here = absl::StrContains(self, "/bazel-out/") ||
                          absl::StrContains(self, "/execroot/");
  return built_here ? "bazel-bin/client/hrxctl" : "hrxctl";
}

std::string StatusLine(Core& core) {
  const CoreStatus status = core.admin().status();
  return absl::StrFormat(
      "serving %u sessions, %u streams, %s in use on %s (%s)", status.sessions,
      status.streams, shared::FormatBytes(status.bytes_in_use),
      status.device.backend, status.device.target);
}

// The groups that own the GPU's device nodes, so that an executor running
// as another user can still open them.
std::vector<gid_t> DeviceGroups() {
  std::vector<gid_t> groups;
  for (const char* node : {"/dev/kfd", "/dev/dri/renderD128"}) {
    struct stat info {};
    if (stat(node, &info) == 0 &&
        std::find(groups.begin(), groups.end(), info.st_gid) == groups.end()) {
      groups.push_back(info.st_gid);
    }
  }
  return groups;
}

// Where tenants' device work runs: executor processes, or hrxd itself.
absl::StatusOr<std::unique_ptr<DeviceSet>> OpenDevices(
    const DaemonOptions& options) {
  auto log = Logger("backend");
  if (!options.executors) {
    HRX_ASSIGN_OR_RETURN(
        std::unique_ptr<backend::Backend> backend,
        backend::OpenBackend(
            {options.backend, options.cpu_memory_bytes, options.gpu_device},
            *log));
    log->warn("executors are off: tenants' kernels run inside hrxd");
    return std::unique_ptr<DeviceSet>(
        std::make_unique<SingleDevice>(std::move(backend)));
  }
  executor::ExecutorOptions executors;
  executors.backend = options.backend;
  executors.cpu_memory_bytes = options.cpu_memory_bytes;
  executors.gpu_device = options.gpu_device;
  executors.log_level = options.log_level;
  executors.watchdog = absl::Milliseconds(options.executor_watchdog_ms);
  executors.call_limit = executors.watchdog;
  executors.hang_limit = std::min(absl::Milliseconds(options.executor_hang_ms),
                                  executors.watchdog);
  executors.cgroups = options.executor_cgroups;
  // A quarter each, half all together: one tenant at its limit leaves the
  // others room in the group they share.
  executors.memory_bytes = options.executor_memory_bytes != 0
                               ? options.executor_memory_bytes
                               : PhysicalMemoryBytes() / 4;
  executors.tenants_memory_bytes = options.tenant_executors_memory_bytes != 0
                                       ? options.tenant_executors_memory_bytes
                                       : PhysicalMemoryBytes() / 2;
  // Not root: executors keep hrxd's own user (what they are told says so).
  executors.uid = geteuid();
  executors.gid = getegid();
  if (geteuid() == 0) {
    const passwd* user = getpwnam(options.executor_user.c_str());
    if (user == nullptr || user->pw_uid == 0) {
      return Refusal(Reason::kExecutorLost,
                     absl::StrFormat("executor user \"%s\" does not exist or "
                                     "is root. Fix: create an unprivileged "
                                     "user for executors, or pass "
                                     "--executor_user.",
                                     options.executor_user));
    }
    executors.uid = user->pw_uid;
    executors.gid = user->pw_gid;
    executors.groups = DeviceGroups();
    executors.uid_base = options.executor_uid_base;
    executors.uid_lease_file = options.executor_uid_lease_file;
    // The whole range must be real, unprivileged uids: never 0, never
    // (uid_t)-1 (which setresuid takes as "unchanged"), never past it.
    const uint64_t last = uint64_t{options.executor_uid_base} +
                          executor::ExecutorOptions::kUidSlots - 1;
    if (options.executor_uid_base != 0 &&
        last >= uint64_t{static_cast<uid_t>(-1)}) {
      return Refusal(
          Reason::kExecutorLost,
          absl::StrFormat("--executor_uid_base=%u: its %u uids would reach "
                          "%u, past the largest uid %u. Fix: pass a base of "
                          "at most %u (or 0 for --executor_user).",
                          options.executor_uid_base,
                          executor::ExecutorOptions::kUidSlots, last,
                          static_cast<uid_t>(-1) - 1,
                          static_cast<uid_t>(-1) - 1 -
                              (executor::ExecutorOptions::kUidSlots - 1)));
    }
  }
  HRX_ASSIGN_OR_RETURN(std::unique_ptr<executor::ExecutorPool> pool,
                       executor::ExecutorPool::Start(executors));
  log->info(
      "executors: tenants' device work runs in sandboxed processes "
      "(user {}, watchdog {} ms)",
      geteuid() != 0 ? std::string("hrxd's own")
      : options.executor_uid_base != 0
          ? absl::StrFormat("a uid of its own from %u",
                            options.executor_uid_base)
          : options.executor_user,
      options.executor_watchdog_ms);
  return std::unique_ptr<DeviceSet>(std::move(pool));
}

BoundSocketOptions BoundSocketsFor(const DaemonOptions& options,
                                   const std::string& socket_path) {
  BoundSocketOptions bound;
  bound.root = options.tenant_socket_dir;
  if (bound.root.empty()) {
    const size_t slash = socket_path.rfind('/');
    bound.root = (slash == std::string::npos ? std::string(".")
                                             : socket_path.substr(0, slash)) +
                 "/tenants";
  }
  bound.max_bound_tenants = options.max_bound_tenants;
  if (const size_t longest = MaxBoundTenantNameBytes(bound.root);
      longest < kMaxBoundTenantNameBytes) {
    Logger("daemon")->warn(
        "bound tenant names may be at most {} bytes (not {}): the tenant "
        "socket directory {} is {} bytes long, and ROOT/NAME/hrxd.sock.fds "
        "must fit a Unix socket path. Fix: pass a shorter "
        "--tenant_socket_dir.",
        longest, kMaxBoundTenantNameBytes, bound.root, bound.root.size());
  }
  return bound;
}

}  // namespace

absl::Status Run(const DaemonOptions& options) {
  // Not dumpable: no process of hrxd's user (an executor, when hrxd is not
  // root) may read its memory, the handle key included, through /proc.
  (void)prctl(PR_SET_DUMPABLE, 0);
  const sigset_t signals = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // SIGIO's default ends the process; hrxd asks for none, so one can only
  // come from a process that named hrxd the owner of its descriptor.
  signal(SIGIO, SIG_IGN);

  HRX_RETURN_IF_ERROR(InitLogging(options.log_level));
  auto log = Logger("daemon");
  if (options.tenant_calls_per_second < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tenant_calls_per_second=%g is negative. Fix: give a rate of 0 "
        "(unpaced) or more.",
        options.tenant_calls_per_second));
  }
  // Before any call: a lane keeps the pace it was made with.
  CallLanes::ForServer().SetPace(options.tenant_calls_per_second,
                                 options.tenant_calls_per_second);
  RaiseOpenFileLimit(*log);
  Notifier notifier;
  if (options.queue_count == 0) {
    return Refusal(Reason::kBadQueueCount,
                   "--queue_count=0: the queue pool needs at least one "
                   "queue. Fix: pass a positive --queue_count (default 8).");
  }
  const Activation activation = InheritedSocket();
  const std::string socket_path = activation.fd >= 0 ? activation.path
                                  : options.socket_path.empty()
                                      ? shared::DefaultSocketPath()
                                      : options.socket_path;
  std::shared_ptr<TenantRegistry> tenants;
  if (options.config_path.empty()) {
    tenants = TenantRegistry::BuiltIn(geteuid());
    log->info(
        "no --config: uid {} is admin tenant \"local\", everyone else "
        "tenant \"default\", no budgets",
        geteuid());
  } else {
    HRX_ASSIGN_OR_RETURN(tenants, TenantRegistry::Load(options.config_path));
  }
  std::optional<RemoteListener> remote;
  if (!options.listen_address.empty()) {
    HRX_ASSIGN_OR_RETURN(remote, ReadRemoteListener(options));
  }
  // Under socket activation the service manager owns the socket's path.
  std::unique_ptr<SocketGuard> guard;
  if (activation.fd < 0) {
    HRX_ASSIGN_OR_RETURN(guard,
                         SocketGuard::Claim(socket_path, options.socket_mode));
  }

  HRX_ASSIGN_OR_RETURN(std::unique_ptr<DeviceSet> devices,
                       OpenDevices(options));
  const backend::DeviceProperties properties = devices->properties();
  CoreOptions core_options;
  core_options.queue_count = options.queue_count;
  core_options.tenants = tenants;
  core_options.ticket_lifetime = absl::Milliseconds(options.ticket_lifetime_ms);
  core_options.remote_session_lease =
      absl::Milliseconds(options.remote_session_lease_ms);
  auto core = std::make_unique<Core>(std::move(devices), core_options);
  HRX_ASSIGN_OR_RETURN(
      std::unique_ptr<DaemonServer> server,
      DaemonServer::Start(*core, socket_path, options.socket_mode,
                          BoundSocketsFor(options, socket_path), remote,
                          activation.fd,
                          options.executors && options.executor_rings));
  if (remote) {
    log->info("also listening on {} (TLS, client certificates required)",
              remote->address);
  }
  std::unique_ptr<MetricsServer> metrics;
  if (!options.metrics_address.empty()) {
    HRX_ASSIGN_OR_RETURN(metrics,
                         MetricsServer::Start(options.metrics_address, *core,
                                              options.metrics_tenants));
    log->info("metrics on http://{}/metrics",
              options.metrics_address.find(':') == std::string::npos
                  ? "127.0.0.1:" + options.metrics_address
                  : options.metrics_address);
  }

  log->info(
      "hrxd listening on unix:{}{} (backend {}, device \"{}\", target "
      "{}, {} of device memory, {} queues)",
      socket_path, activation.fd >= 0 ? " (socket activation)" : "",
      properties.backend, properties.name, properties.target,
      shared::FormatBytes(properties.memory_bytes), options.queue_count);
  std::printf("hrxd is listening on %s\ntry:  %s --socket=%s status\n",
              socket_path.c_str(), HrxctlHint().c_str(), socket_path.c_str());
  std::fflush(stdout);
  notifier.Ready(StatusLine(*core));

  // The main loop: signals, and a watchdog ping each time it comes round
  // having proved the core answers (status() takes the core's locks).
  const std::optional<absl::Duration> watchdog = Notifier::WatchdogInterval();
  const absl::Duration tick =
      watchdog ? std::min(*watchdog / 2, absl::Seconds(5)) : absl::Seconds(5);
  int stop_signal = 0;
  absl::Status device_lost;
  while (stop_signal == 0) {
    const timespec timeout = absl::ToTimespec(tick);
    const int received = sigtimedwait(&signals, nullptr, &timeout);
    if (received == SIGINT || received == SIGTERM) {
      stop_signal = received;
    } else if (received == SIGHUP) {
      notifier.Reloading();
      if (options.config_path.empty()) {
        log->warn("SIGHUP: no --config to reload");
      } else {
        auto fresh = TenantRegistry::Load(options.config_path);
        absl::Status reloaded = fresh.status();
        if (fresh.ok())
          reloaded = core->admin().ReloadTenants(std::move(**fresh));
        if (reloaded.ok()) {
          log->info("SIGHUP: reloaded tenants and budgets from {}",
                    options.config_path);
        } else {
          log->error("SIGHUP: kept the previous config: {}",
                     std::string(reloaded.message()));
        }
      }
      notifier.ReloadDone(StatusLine(*core));
    }
    if (absl::Status device = core->admin().device_status();
        !device.ok() && device_lost.ok()) {
      device_lost = device;
      log->error("the device is lost: {} {}", std::string(device.message()),
                 options.exit_on_device_loss
                     ? "Stopping (--exit_on_device_loss) to be restarted."
                     : "Every command on it fails until hrxd restarts.");
      if (options.exit_on_device_loss) break;
    }
    const std::string status =
        device_lost.ok() ? StatusLine(*core) : "device lost; restart hrxd";
    if (watchdog) notifier.Watchdog();
    notifier.Status(status);
  }
  if (stop_signal == 0) {
    // The device is lost and --exit_on_device_loss: no drain (nothing more
    // completes on a lost context); clients see the socket close.
    notifier.Stopping("device lost");
    metrics.reset();
    server->Shutdown(absl::ZeroDuration());
    server.reset();
    core.reset();
    guard.reset();
    return Refusal(Reason::kDeviceLost,
                   absl::StrCat("", std::string(device_lost.message()),
                                " Fix: let systemd restart hrxd "
                                "(Restart=on-failure), and check the "
                                "kernel that faulted."));
  }
  log->info("received {}: no longer accepting calls, draining queued work",
            stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
  notifier.Stopping("draining queued work");
  metrics.reset();
  // Half of --stop_timeout_ms for calls in progress (then they are
  // cancelled: clients see UNAVAILABLE or CANCELLED, never a hang), half for
  // queued work to drain (a hung kernel must not keep hrxd from stopping
  // within systemd's TimeoutStopSec).
  const absl::Duration half = absl::Milliseconds(options.stop_timeout_ms) / 2;
  // The server's shutdown waits for every call to finish, and a call waiting
  // on queued work (a sync, a stream's destroy) finishes only when that work
  // does: it runs on its own thread so that a hung kernel bounds the drain
  // below, not the stop.
  absl::Notification server_stopped;
  std::thread server_stopper([&server, &server_stopped, half] {
    server->Shutdown(half);
    server_stopped.Notify();
  });
  const absl::Time stop_by = absl::Now() + 2 * half;
  (void)server_stopped.WaitForNotificationWithTimeout(half);
  const bool drained =
      core->Drain(stop_by - absl::Now()) &&
      server_stopped.WaitForNotificationWithTimeout(stop_by - absl::Now());
  if (!drained) {
    // A kernel still runs: leave it (and the objects it uses) to the exit.
    log->warn("queued work did not drain within {}; stopping anyway",
              absl::FormatDuration(half));  // at least half was left for it
    // A kernel still runs on a backend thread: tearing the core down would
    // wait for it. Remove the socket and leave at once instead.
    guard.reset();
    log->flush();
    std::fflush(nullptr);
    // Left to the exit with everything else (it may still be in Shutdown,
    // which waits for that kernel's call); detached, it is not a thread
    // that was never joined (ThreadSanitizer reports one at _exit).
    server_stopper.detach();
    _exit(0);
  }
  server_stopper.join();
  server.reset();
  core.reset();
  guard.reset();
  log->info("stopped cleanly");
  return absl::OkStatus();
}

}  // namespace hrx::daemon
