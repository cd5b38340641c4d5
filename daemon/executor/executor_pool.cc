#include "daemon/executor/executor_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "daemon/executor/executor_main.h"
#include "daemon/executor/sandbox.h"
#include "daemon/executor/work_report.h"
#include "daemon/logging.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

extern char** environ;

namespace hrx::executor {

using backend::remote::ExecutorLink;
using backend::remote::ExecutorLostStatus;
using backend::remote::RemoteBackend;

namespace {

// `message` up to its Fix, for quoting inside a refusal that has its own.
std::string WithoutFix(absl::string_view message) {
  const size_t fix = message.find(" Fix: ");
  return std::string(absl::StripTrailingAsciiWhitespace(
      fix == absl::string_view::npos ? message : message.substr(0, fix)));
}

// How a reaped executor ended, for its tenants' refusals and the log.
std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* why = signal == SIGKILL ? " (killed: a hang, or memory)"
                      : signal == SIGSEGV || signal == SIGBUS ||
                              signal == SIGILL || signal == SIGFPE
                          ? " (a kernel crashed it)"
                          : "";
    return absl::StrFormat("was killed by signal %d, %s%s", signal,
                           strsignal(signal), why);
  }
  if (WIFEXITED(status)) {
    return absl::StrFormat("exited with status %d", WEXITSTATUS(status));
  }
  return "ended";
}

// SIGKILL to an executor that may already have been reaped.
void KillExecutor(const shared::UniqueFd& pidfd) {
  if (pidfd.valid()) {
    (void)syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  }
}

std::string MiBOrNoLimit(uint64_t bytes) {
  return bytes == 0 ? std::string("no limit")
                    : absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutorPool>> ExecutorPool::Start(
    const ExecutorOptions& options) {
  auto pool = std::unique_ptr<ExecutorPool>(new ExecutorPool(options));
  pool->log_pump_ =
      std::make_unique<ExecutorLogPump>([](const std::string& line) {
        // Warning level: an executor's own last words (why it could not
        // start) must reach a log at the default level; a chatty tenant is
        // held to the pump's rate.
        daemon::Logger("executor")->warn("{}", line);
      });
  if (options.cgroups) {
    auto cgroups = ExecutorCgroups::Open(options.tenants_memory_bytes);
    if (cgroups.ok()) {
      pool->cgroups_ = *std::move(cgroups);
      // No memory controller: the limits below are not in force.
      const bool caps = pool->cgroups_->caps_memory();
      daemon::Logger("executor")
          ->info(
              "each executor runs in a control group of its own ({}): {} "
              "tasks, {} of memory for a tenant's own, {} for all tenants' "
              "own together",
              pool->cgroups_->Describe(), kExecutorMaxThreads,
              MiBOrNoLimit(caps ? options.memory_bytes : 0),
              MiBOrNoLimit(caps ? options.tenants_memory_bytes : 0));
    } else {
      daemon::Logger("executor")
          ->warn("{}", std::string(cgroups.status().message()));
    }
  }
  if (options.uid_base != 0) {
    HRX_ASSIGN_OR_RETURN(pool->uid_leases_,
                         UidLeases::Open(options.uid_lease_file));
  }
  absl::StatusOr<uint32_t> slot;
  {
    absl::MutexLock lock(&pool->mu_);
    Executor& shared = pool->executors_[kSharedKey];
    shared.name = kShared;
    slot = pool->SlotOf(shared);
    if (!slot.ok()) return slot.status();
  }
  // Nothing else runs yet, but Launch waits for the executor: never locked.
  auto launched = pool->Launch(kShared, Role::kShared, *slot);
  if (!launched.ok()) return launched.status();
  {
    absl::MutexLock lock(&pool->mu_);
    Executor& shared = pool->executors_[kSharedKey];
    Install(shared, *std::move(launched));
    pool->properties_ = shared.backend->properties();
  }
  pool->watchdog_ = std::thread([raw = pool.get()] { raw->Watch(); });
  return pool;
}

ExecutorPool::~ExecutorPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [name, executor] : executors_) {
    // Closing the socket ends an executor; its queues drained with hrxd's.
    executor.backend.reset();
  }
}

absl::StatusOr<uint32_t> ExecutorPool::SlotOf(Executor& executor) {
  if (executor.slot != kNoSlot) return executor.slot;
  while (next_slot_ < ExecutorOptions::kUidSlots) {
    const uint32_t slot = next_slot_++;
    if (uid_leases_ == nullptr) return executor.slot = slot;
    const uid_t uid = options_.uid_base + slot;
    absl::StatusOr<bool> leased = uid_leases_->TryLease(uid);
    if (!leased.ok()) {
      return Refusal(
          Reason::kExecutorLost,
          absl::StrCat("the executor of \"", executor.name,
                       "\" could not start: ", leased.status().message()));
    }
    if (*leased) return executor.slot = slot;
    daemon::Logger("executor")
        ->info("uid {} is another hrxd's executor's ({}); skipped", uid,
               uid_leases_->path());
  }
  return Refusal(
      Reason::kExecutorLost,
      absl::StrFormat("the executor of \"%s\" could not start: hrxd has "
                      "given all %u executor slots (uids from %u, control "
                      "groups) out, or other hrxds hold their uids. Fix: "
                      "restart hrxd (slots are given per executor name for "
                      "its life), or give each hrxd another "
                      "--executor_uid_base.",
                      executor.name, ExecutorOptions::kUidSlots,
                      options_.uid_base));
}

absl::StatusOr<ExecutorPool::Launched> ExecutorPool::Launch(
    const std::string& name, Role role, uint32_t slot) const {
  // Its own uid and gid where hrxd can give one, else the executor user's.
  const bool own_uid = options_.uid_base != 0 && options_.uid != 0;
  const uid_t uid = own_uid ? options_.uid_base + slot : options_.uid;
  const gid_t gid = own_uid ? options_.uid_base + slot : options_.gid;
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    return ExecutorLostStatus(
        name,
        absl::StrCat("could not start: socketpair: ", std::strerror(errno)));
  }
  std::vector<std::string> args = {
      "hrxd-executor",
      kExecutorFlag,
      "--tenant=" + name,
      "--backend=" + options_.backend,
      absl::StrCat("--cpu_memory_bytes=", options_.cpu_memory_bytes),
      absl::StrCat("--gpu_device=", options_.gpu_device),
      "--log_level=" + options_.log_level,
      absl::StrCat("--uid=", uid),
      absl::StrCat("--gid=", gid),
      absl::StrCat("--own_uid=", own_uid ? 1 : 0),
      "--groups=" + absl::StrJoin(options_.groups, ","),
      absl::StrCat("--parent=", getpid()),
  };
  if (cgroups_ != nullptr) {
    // A tenant's own executor runs its kernels: its memory is capped; the
    // shared one runs none, and holds every other tenant's buffers.
    auto procs = cgroups_->Prepare(
        slot, CgroupLimits{kExecutorMaxThreads,
                           role == Role::kShared ? 0 : options_.memory_bytes,
                           role == Role::kTenantsOwn});
    if (!procs.ok()) {
      return ExecutorLostStatus(
          name, absl::StrCat("could not start: its control group: ",
                             procs.status().message()));
    }
    args.push_back("--cgroup_procs=" + absl::StrJoin(*procs, ","));
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Its stdout and stderr go to hrxd's log only through the pump (escaped,
  // cut, rate-limited, named).
  int output[2] = {-1, -1};
  if (pipe2(output, O_CLOEXEC) != 0) {
    close(ends[0]);
    close(ends[1]);
    return ExecutorLostStatus(
        name, absl::StrCat("could not start: pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], kExecutorSocketFd);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
  // Nothing of hrxd's terminal: stdin is /dev/null, and a session of its
  // own leaves it no controlling terminal.
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  // A session (and process group) of its own: nothing it signals as a
  // group reaches hrxd's, and it has no controlling terminal.
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes,
                                  argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(ends[1]);
  close(output[1]);
  // Named so that no tenant's output passes for the shared executor's.
  log_pump_->Add(role == Role::kShared ? "shared executor"
                                       : absl::StrCat("executor of ", name),
                 shared::UniqueFd(output[0]));
  if (spawned != 0) {
    close(ends[0]);
    return ExecutorLostStatus(
        name, absl::StrCat("could not start: ", std::strerror(spawned)));
  }
  // Asked when the socket ends: the process is reaped (killed first, in case
  // only its socket went) and its end described.
  ExecutorLink::Cause cause = [pid, name]() {
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExecutorLostStatus(name, Describe(status));
  };
  // Signals after the reader may have reaped it go through a pidfd, never
  // the number, which the kernel may have given to another process by then.
  auto pidfd = std::make_shared<const shared::UniqueFd>(
      static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  auto link =
      ExecutorLink::Open(shared::UniqueFd(ends[0]), name, options_.start_limit,
                         options_.call_limit, std::move(cause));
  if (!link.ok()) return link.status();
  return Launched{pid, std::move(pidfd),
                  std::make_shared<RemoteBackend>(*std::move(link))};
}

absl::StatusOr<std::shared_ptr<backend::Backend>> ExecutorPool::For(
    const daemon::Tenant& tenant) {
  const bool own = tenant.own_executor();
  const std::string key = own ? tenant.name() : kSharedKey;
  const std::string name = own ? tenant.name() : kShared;
  absl::MutexLock lock(&mu_);
  Executor& executor = executors_[key];  // never erased: stays valid
  executor.name = name;
  while (executor.backend == nullptr) {
    if (executor.launching) {
      // Another call is starting it: wait for that one, without holding
      // anyone else's call up (mu_ is free meanwhile).
      auto started = [&executor]() { return !executor.launching; };
      mu_.Await(absl::Condition(&started));
      continue;
    }
    const absl::Time now = absl::Now();
    if (now < executor.retry_at) {
      return Refusal(
          Reason::kExecutorRestarting,
          absl::StrFormat("the executor of \"%s\" restarts in %s (last "
                          "lost: %s). Fix: retry then.",
                          name, absl::FormatDuration(executor.retry_at - now),
                          executor.last_loss));
    }
    // Started unlocked: it may take up to the call limit to say hello, and
    // other tenants' executors are none of its business.
    auto slot = SlotOf(executor);
    if (!slot.ok()) return slot.status();
    executor.launching = true;
    mu_.Unlock();
    auto launched =
        Launch(name, own ? Role::kTenantsOwn : Role::kShared, *slot);
    mu_.Lock();
    executor.launching = false;
    if (!launched.ok()) {
      // From now (the start may have taken the call limit), growing while
      // it keeps failing.
      executor.last_loss = WithoutFix(launched.status().message());
      executor.failures_in_a_row = std::min(executor.failures_in_a_row + 1, 16);
      executor.retry_at =
          absl::Now() + std::min(options_.first_backoff *
                                     (1 << (executor.failures_in_a_row - 1)),
                                 options_.max_backoff);
      return launched.status();
    }
    Install(executor, *std::move(launched));
  }
  executor.tenants.insert(tenant.name());
  return executor.backend;
}

void ExecutorPool::Install(Executor& executor, Launched launched) {
  executor.pid = launched.pid;
  executor.pidfd = std::move(launched.pidfd);
  executor.backend = std::move(launched.backend);
}

void ExecutorPool::Lost(const std::string& name, ExecutorLink* link,
                        absl::Status why) {
  std::vector<std::string> tenants;
  LostCallback lost;
  {
    absl::MutexLock lock(&mu_);
    auto it = executors_.find(name);
    if (it == executors_.end() || it->second.backend == nullptr ||
        it->second.backend->link().get() != link) {
      return;  // handled already
    }
    Executor& executor = it->second;
    const pid_t pid = executor.pid;
    dying_.push_back(std::move(executor.backend));
    executor.backend.reset();
    executor.pid = 0;
    executor.pidfd.reset();
    ++executor.restarts;
    // Backoff grows only while the executor dies before serving anything (a
    // start that fails); a tenant whose kernels crash a working executor
    // pays the first backoff each time, on its own executor.
    executor.failures_in_a_row =
        link->served() ? 1 : std::min(executor.failures_in_a_row + 1, 16);
    const absl::Duration backoff = std::min(
        options_.first_backoff * (1 << (executor.failures_in_a_row - 1)),
        options_.max_backoff);
    executor.retry_at = absl::Now() + backoff;
    executor.last_loss = WithoutFix(why.message());
    tenants.assign(executor.tenants.begin(), executor.tenants.end());
    executor.tenants.clear();
    lost = lost_;
    const absl::Time now = absl::Now();
    if (now - executor.loss_logged_at >= kLossLogInterval) {
      executor.loss_logged_at = now;
      const uint64_t unlogged = std::exchange(executor.losses_unlogged, 0);
      // Escaped: a forged frame's description may carry bytes the
      // executor chose, and no byte of it may start a line of its own.
      daemon::Logger("executor")
          ->warn(
              "executor of \"{}\" (pid {}, serving {}) lost: {}; restart "
              "{} in {}{}",
              executor.name, pid,
              tenants.empty() ? "no session" : absl::StrJoin(tenants, ","),
              absl::CHexEscape(executor.last_loss), executor.restarts,
              absl::FormatDuration(backoff),
              unlogged == 0
                  ? ""
                  : absl::StrFormat(" (%u losses since the last line)",
                                    unlogged));
    } else {
      ++executor.losses_unlogged;
    }
  }
  if (lost) lost(tenants, why, link->lost_at());
}

ExecutorPool::Running ExecutorPool::Stop(const daemon::Tenant& tenant,
                                         const std::string& why,
                                         bool forget_tenants) {
  if (!tenant.own_executor()) return {};
  Running running;
  {
    absl::MutexLock lock(&mu_);
    auto it = executors_.find(tenant.name());
    if (it == executors_.end() || it->second.backend == nullptr) return {};
    if (forget_tenants) it->second.tenants.clear();
    running = {it->second.backend->link(), it->second.pidfd};
  }
  running.link->Lose(ExecutorLostStatus(tenant.name(), why));
  KillExecutor(*running.pidfd);
  return running;
}

void ExecutorPool::Retire(const daemon::Tenant& tenant) {
  // Its sessions are closed: the loss ends nobody's work. The watchdog's
  // next round reaps it as it would a lost executor.
  Stop(tenant, "was stopped because its tenant was removed",
       /*forget_tenants=*/true);
}

void ExecutorPool::Abort(const daemon::Tenant& tenant, const std::string& why) {
  // As the watchdog's kill, reported at once (its listing says why before
  // the eviction that asked for it returns).
  const Running stopped = Stop(tenant, why, /*forget_tenants=*/false);
  if (stopped.link != nullptr) {
    Lost(tenant.name(), stopped.link.get(), stopped.link->lost());
  }
}

void ExecutorPool::Watch() {
  while (true) {
    std::vector<std::pair<std::string, std::shared_ptr<ExecutorLink>>> links;
    std::vector<std::shared_ptr<const shared::UniqueFd>> pidfds;
    // Let go of here, outside the lock, on this thread.
    std::vector<std::shared_ptr<backend::remote::RemoteBackend>> gone;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = dying_.begin(); it != dying_.end();) {
        if ((*it)->link()->delivered()) {
          gone.push_back(std::move(*it));
          it = dying_.erase(it);
        } else {
          ++it;
        }
      }
      auto stop = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop),
                               absl::Milliseconds(100))) {
        return;
      }
      for (auto& [key, executor] : executors_) {
        if (executor.backend == nullptr) continue;
        links.emplace_back(key, executor.backend->link());
        pidfds.push_back(executor.pidfd);
      }
    }
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < links.size(); ++i) {
      auto& [key, link] = links[i];
      if (link->lost().ok() && link->Stalled(now, options_.watchdog)) {
        link->Lose(ExecutorLostStatus(
            link->tenant(),
            absl::StrFormat("made no progress for %s (a kernel that "
                            "does not finish) and was killed",
                            absl::FormatDuration(options_.watchdog))));
        KillExecutor(*pidfds[i]);
      }
      if (link->lost().ok() && link->Overdue(now)) {
        link->Lose(ExecutorLostStatus(
            link->tenant(),
            absl::StrFormat(
                "did not report a session's end within %s (its "
                "work there not done, or a broken executor) and "
                "was killed",
                absl::FormatDuration(backend::remote::kSessionEndLimit))));
        KillExecutor(*pidfds[i]);
      }
      if (link->lost().ok() && link->Unresponsive(now, HangLimit())) {
        link->Lose(ExecutorLostStatus(
            link->tenant(),
            absl::StrFormat("did not answer hrxd's ping within %s (stopped, "
                            "or its main thread stuck) and was killed",
                            absl::FormatDuration(HangLimit()))));
        KillExecutor(*pidfds[i]);
      }
      if (link->lost().ok()) link->Ping(now, kPingInterval);
      if (!link->lost().ok()) {
        // Lost by a call that timed out (a hang) or a broken frame: make sure
        // the process is gone too; its reader reaps it.
        KillExecutor(*pidfds[i]);
        Lost(key, link.get(), link->lost());
      }
    }
  }
}

uint64_t ExecutorPool::bytes_in_use() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [name, executor] : executors_) {
    if (executor.backend != nullptr) total += executor.backend->bytes_in_use();
  }
  return total;
}

std::vector<backend::ExportKind> ExecutorPool::export_kinds() const {
  absl::MutexLock lock(&mu_);
  auto it = executors_.find(kSharedKey);
  if (it == executors_.end() || it->second.backend == nullptr) return {};
  return it->second.backend->export_kinds();
}

std::vector<daemon::ExecutorInfo> ExecutorPool::executors() const {
  std::vector<daemon::ExecutorInfo> list;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, executor] : executors_) {
    daemon::ExecutorInfo info;
    info.name = executor.name;
    info.pid = executor.pid;
    info.running = executor.backend != nullptr;
    info.restarts = executor.restarts;
    info.bytes_in_use =
        executor.backend != nullptr ? executor.backend->bytes_in_use() : 0;
    info.tenants.assign(executor.tenants.begin(), executor.tenants.end());
    info.last_loss = executor.last_loss;
    list.push_back(std::move(info));
  }
  return list;
}

daemon::UsageCounts ExecutorPool::HeldElsewhere(
    const std::string& tenant) const {
  std::vector<std::shared_ptr<backend::remote::ExecutorLink>> links;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, executor] : executors_) {
      // Only what an executor that runs the tenant's work says of it.
      if (executor.backend != nullptr && executor.tenants.contains(tenant)) {
        links.push_back(executor.backend->link());
      }
    }
  }
  daemon::UsageCounts usage = {};
  auto add = [&](daemon::Resource resource, uint64_t amount) {
    uint64_t& total = usage[static_cast<size_t>(resource)];
    total = amount > UINT64_MAX - total ? UINT64_MAX : total + amount;
  };
  for (const auto& link : links) {
    for (const hrx::executor::v1::HeldUsage& held : link->held()) {
      if (held.tenant() != tenant) continue;
      add(daemon::Resource::kInflightCommands, held.inflight_commands());
      add(daemon::Resource::kReplyBytes, held.reply_bytes());
      add(daemon::Resource::kEvents, held.events());
    }
  }
  return usage;
}

daemon::WorkTotals ExecutorPool::WorkElsewhere() const {
  std::vector<std::shared_ptr<backend::remote::ExecutorLink>> links;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, executor] : executors_) {
      if (executor.backend != nullptr) {
        links.push_back(executor.backend->link());
      }
    }
  }
  // Current reports: asked of every executor at once, each waited for at
  // most until the common deadline (a frozen one gives its last report).
  std::vector<uint64_t> asked;
  for (const auto& link : links) asked.push_back(link->AskReport());
  const absl::Time deadline = absl::Now() + kReportWait;
  daemon::WorkTotals totals;
  for (size_t i = 0; i < links.size(); ++i) {
    links[i]->AwaitReport(asked[i], deadline);
    totals += DecodeWork(links[i]->work());
  }
  return totals;
}

void ExecutorPool::SetLostCallback(LostCallback lost) {
  absl::MutexLock lock(&mu_);
  lost_ = std::move(lost);
}

}  // namespace hrx::executor
