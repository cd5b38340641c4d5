#include "daemon/backend/remote/executor_link.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/backend/remote/remote_queue.h"
#include "shared/refusal.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;

// The link whose delivery thread this is (null on every other thread): a
// completion callback that loses the link runs there with deliver_mu_ held.
// Set by the thread itself, so it is right from the thread's first event;
// comparing with deliver_thread_'s id raced with Open's assignment of it.
thread_local const ExecutorLink* delivering_for = nullptr;

}  // namespace

absl::Status ExecutorLostStatus(const std::string& name,
                                const std::string& why) {
  return Refusal(Reason::kExecutorLost,
                 absl::StrFormat("the executor of \"%s\" %s; its sessions "
                                 "ended and their pending work failed. Fix: "
                                 "open a new session (hrxd restarts the "
                                 "executor); find the faulting kernel in "
                                 "hrxd's log.",
                                 name, why));
}

absl::StatusOr<std::shared_ptr<ExecutorLink>> ExecutorLink::Open(
    shared::UniqueFd socket, std::string tenant, absl::Duration start_limit,
    absl::Duration call_limit, Cause cause) {
  pollfd ready{socket.get(), POLLIN, 0};
  const absl::Time deadline = absl::Now() + start_limit;
  int waited = 0;
  do {
    const absl::Duration left =
        std::max(deadline - absl::Now(), absl::ZeroDuration());
    waited = poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(left)));
  } while (waited < 0 && errno == EINTR);
  if (waited == 0) {
    // Still starting: the cause kills it, so its end says nothing of why.
    (void)cause();
    return ExecutorLostStatus(
        tenant, absl::StrFormat("did not start within %s (the executor start "
                                "limit) and was killed",
                                absl::FormatDuration(start_limit)));
  }
  FrameReader first(socket.get());
  std::string bytes;
  wire::Event event;
  if (waited != 1 || !first.Next(&bytes) || !event.ParseFromString(bytes) ||
      !event.has_hello()) {
    absl::Status why = cause();
    return why.ok() ? ExecutorLostStatus(tenant, "did not start") : why;
  }
  auto link = std::shared_ptr<ExecutorLink>(new ExecutorLink(
      std::move(socket), std::move(tenant), call_limit, std::move(cause)));
  link->hello_ = event.hello();
  link->reader_thread_ = std::thread([raw = link.get()] { raw->ReadLoop(); });
  link->deliver_thread_ =
      std::thread([raw = link.get()] { raw->DeliverLoop(); });
  return link;
}

ExecutorLink::ExecutorLink(shared::UniqueFd socket, std::string tenant,
                           absl::Duration call_limit, Cause cause)
    : socket_(std::move(socket)),
      tenant_(std::move(tenant)),
      call_limit_(call_limit),
      cause_(std::move(cause)),
      reader_(socket_.get()),
      writer_(socket_.get()) {}

ExecutorLink::~ExecutorLink() {
  // The owner has killed the process (or it exited): the reader ends.
  shutdown(socket_.get(), SHUT_RDWR);
  if (reader_thread_.joinable()) reader_thread_.join();
  if (deliver_thread_.joinable()) deliver_thread_.join();
}

absl::StatusOr<ExecutorLink::Answer> ExecutorLink::Call(wire::Request request,
                                                        shared::UniqueFd fd) {
  Pending pending;
  request.set_id(NewId());
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok()) return lost_;
    calls_[request.id()] = &pending;
  }
  writer_.Send(request, std::move(fd));
  absl::MutexLock lock(&mu_);
  auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending.done || !lost_.ok();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&answered), call_limit_)) {
    calls_.erase(request.id());
    mu_.Unlock();
    Lose(ExecutorLostStatus(
        tenant_, absl::StrFormat("did not answer within %s (hung)",
                                 absl::FormatDuration(call_limit_))));
    mu_.Lock();
    return lost_;
  }
  calls_.erase(request.id());
  if (!pending.done) return lost_;
  const wire::Reply& reply = pending.answer.reply;
  if (reply.code() != 0) return StatusFromWire(reply.code(), reply.message());
  return std::move(pending.answer);
}

void ExecutorLink::Post(const wire::Request& request, shared::UniqueFd fd) {
  writer_.Send(request, std::move(fd));
}

void ExecutorLink::Forget(wire::Forget::Kind kind, uint64_t object) {
  if (!lost().ok()) return;
  wire::Request request;
  request.mutable_forget()->set_kind(kind);
  request.mutable_forget()->set_object(object);
  Post(request);
}

void ExecutorLink::Attach(uint64_t queue, RemoteQueue* target) {
  absl::MutexLock lock(&mu_);
  queues_[queue] = target;
}

void ExecutorLink::Detach(uint64_t queue) {
  absl::MutexLock delivering(&deliver_mu_);
  absl::MutexLock attached(&attached_mu_);
  absl::MutexLock lock(&mu_);
  queues_.erase(queue);
}

uint64_t ExecutorLink::CachedGraph(const backend::GraphRef& plan) {
  std::vector<uint64_t> forgotten;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = graphs_.begin(); it != graphs_.end();) {
      if (it->second.plan.expired()) {
        forgotten.push_back(it->second.id);
        graphs_.erase(it++);
      } else {
        ++it;
      }
    }
    auto found = graphs_.find(plan.get());
    if (found != graphs_.end()) id = found->second.id;
  }
  for (uint64_t gone : forgotten) Forget(wire::Forget::KIND_GRAPH, gone);
  return id;
}

void ExecutorLink::CacheGraph(const backend::GraphRef& plan, uint64_t id) {
  absl::MutexLock lock(&mu_);
  graphs_[plan.get()] = Defined{plan, id};
}

std::vector<hrx::executor::v1::HeldUsage> ExecutorLink::held() const {
  absl::MutexLock lock(&mu_);
  if (!lost_.ok()) return {};
  return held_;
}

hrx::executor::v1::WorkTotals ExecutorLink::work() const {
  absl::MutexLock lock(&mu_);
  if (!lost_.ok()) return {};
  return work_;
}

uint64_t ExecutorLink::Expect(absl::Time by) {
  const uint64_t token = NewId();
  absl::MutexLock lock(&mu_);
  expected_[token] = by;
  return token;
}

void ExecutorLink::Kept(uint64_t token) {
  absl::MutexLock lock(&mu_);
  expected_.erase(token);
}

bool ExecutorLink::Overdue(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [token, by] : expected_) {
    if (by < now) return true;
  }
  return false;
}

uint64_t ExecutorLink::AskReport() {
  wire::Request ping;
  ping.set_id(NewId());
  ping.mutable_report_work();
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok()) return 0;
    reports_asked_.insert(ping.id());
  }
  Post(ping);
  return ping.id();
}

void ExecutorLink::AwaitReport(uint64_t id, absl::Time deadline) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !reports_asked_.contains(id) || !lost_.ok();
  };
  mu_.AwaitWithDeadline(absl::Condition(&answered), deadline);
  reports_asked_.erase(id);
}

absl::Status ExecutorLink::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

absl::Time ExecutorLink::lost_at() const {
  absl::MutexLock lock(&mu_);
  return lost_at_;
}

void ExecutorLink::Lose(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok()) return;
    lost_ = std::move(why);
    lost_at_ = absl::Now();
    if (delivering_for != this) {
      // The delivery thread tells the queues: it may be inside a completion
      // callback waiting for a lock that this thread holds (a session's,
      // across a call that timed out), so waiting for it here could wait
      // forever.
      loss_unannounced_ = true;
      return;
    }
  }
  // A callback the delivery thread runs lost the link: it holds
  // deliver_mu_ already.
  deliver_mu_.AssertHeld();
  NotifyLostDelivering();
}

bool ExecutorLink::Stalled(absl::Time now, absl::Duration limit) {
  // Queues are asked without mu_ (a queue takes mu_ under its own lock when
  // it lets go of memory); attached_mu_ keeps them attached meanwhile. Not
  // deliver_mu_: the delivery thread may be in a callback that waits up to
  // the call limit (for a session's lock held across a call to this
  // executor), and the watchdog serves every executor.
  absl::MutexLock attached(&attached_mu_);
  std::vector<RemoteQueue*> queues;
  {
    absl::MutexLock lock(&mu_);
    // Progress may be waiting for the delivery thread: not a stall of the
    // executor's. Asked again at the watchdog's next round.
    if (!events_.empty()) return false;
    // Work on the rings the executor serves itself, as of its last pong.
    if (ring_stall_ > limit) return true;
    for (const auto& [id, queue] : queues_) queues.push_back(queue);
  }
  for (RemoteQueue* queue : queues) {
    if (queue->StalledSince(now) > limit) return true;
  }
  return false;
}

void ExecutorLink::Ping(absl::Time now, absl::Duration interval) {
  wire::Request ping;
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok() || ping_id_ != 0 || now - pong_at_ < interval) return;
    ping_id_ = NewId();
    ping_sent_ = now;
    ping.set_id(ping_id_);
  }
  ping.mutable_ping();
  writer_.SendFirst(ping);  // never behind work the executor has not read
}

bool ExecutorLink::Unresponsive(absl::Time now, absl::Duration limit) const {
  absl::MutexLock lock(&mu_);
  return ping_id_ != 0 && now - ping_sent_ > limit;
}

void ExecutorLink::ReadLoop() {
  std::string bytes;
  wire::Event event;
  while (reader_.Next(&bytes)) {
    if (!event.ParseFromString(bytes)) break;
    if (event.has_reply()) {
      Deliver(event);
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (events_.size() >= kMaxQueuedEvents ||
        event_bytes_ + bytes.size() > kMaxQueuedEventBytes) {
      if (lost_.ok()) {
        lost_ = ExecutorLostStatus(
            tenant_,
            absl::StrFormat("sent events faster than hrxd delivers them (%u "
                            "frames, %u bytes waiting; at most %u and %u) and "
                            "was killed",
                            events_.size(), event_bytes_ + bytes.size(),
                            kMaxQueuedEvents, kMaxQueuedEventBytes));
        lost_at_ = absl::Now();
      }
      break;  // cause_ kills it; what was queued is still delivered
    }
    event_bytes_ += bytes.size();
    events_.emplace_back(std::move(event), bytes.size());
    event.Clear();
  }
  absl::Status why = cause_();
  // Calls fail now; queues hear of it once the events read before the end
  // are delivered (their completions stand).
  absl::MutexLock lock(&mu_);
  if (lost_.ok()) {
    lost_ =
        why.ok() ? ExecutorLostStatus(tenant_, "closed its connection") : why;
    lost_at_ = absl::Now();
  }
  reading_done_ = true;
}

void ExecutorLink::DeliverLoop() {
  delivering_for = this;
  while (true) {
    wire::Event event;
    bool announce = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return reading_done_ || !events_.empty() || loss_unannounced_;
      };
      mu_.Await(absl::Condition(&ready));
      announce = std::exchange(loss_unannounced_, false);
    }
    if (announce) {
      absl::MutexLock delivering(&deliver_mu_);
      NotifyLostDelivering();
    }
    {
      absl::MutexLock lock(&mu_);
      if (events_.empty()) {
        if (reading_done_) break;  // read to the end, all delivered
        continue;
      }
      event = std::move(events_.front().first);
      event_bytes_ -= events_.front().second;
      events_.pop_front();
    }
    absl::MutexLock delivering(&deliver_mu_);
    Deliver(event);
  }
  {
    absl::MutexLock delivering(&deliver_mu_);
    NotifyLostDelivering();
  }
  delivered_.store(true);
}

void ExecutorLink::NotifyLostDelivering() {
  std::vector<RemoteQueue*> queues;
  absl::Status why;
  LostHandler on_lost;
  {
    absl::MutexLock lock(&mu_);
    why = lost_;
    for (auto& [id, queue] : queues_) queues.push_back(queue);
    on_lost = on_lost_;
  }
  for (RemoteQueue* queue : queues) queue->OnLost(why);
  if (on_lost) on_lost();
}

void ExecutorLink::SetControlHandler(ControlHandler handler,
                                     LostHandler on_lost) {
  absl::MutexLock lock(&mu_);
  control_ = std::move(handler);
  on_lost_ = std::move(on_lost);
}

void ExecutorLink::Deliver(wire::Event& event) {
  if (event.has_reply()) {
    wire::Reply& reply = *event.mutable_reply();
    served_.store(true);
    shared::UniqueFd fd =
        reply.has_fd() ? reader_.TakeFd() : shared::UniqueFd();
    absl::MutexLock lock(&mu_);
    if (reply.has_work()) work_ = reply.work();
    if (reports_asked_.erase(reply.id()) != 0) return;
    if (reply.id() == ping_id_ && ping_id_ != 0) {
      ping_id_ = 0;
      pong_at_ = absl::Now();
      ring_stall_ = absl::Milliseconds(reply.ring_stall_ms());
      held_.assign(
          reply.held().begin(),
          reply.held().begin() + std::min(reply.held_size(), kMaxHeldEntries));
      return;
    }
    auto it = calls_.find(reply.id());
    if (it == calls_.end()) return;  // the caller gave up
    it->second->answer = Answer{std::move(reply), std::move(fd)};
    it->second->done = true;
    return;
  }
  if (event.has_ask() || event.has_ring_ended() || event.has_released() ||
      event.has_event_answer()) {
    ControlHandler control;
    {
      absl::MutexLock lock(&mu_);
      control = control_;
    }
    if (control) control(event);
    return;
  }
  uint64_t queue_id = 0;
  if (event.has_progress()) queue_id = event.progress().queue();
  if (event.has_queue_failed()) queue_id = event.queue_failed().queue();
  if (event.has_read_data()) queue_id = event.read_data().queue();
  if (event.has_profile()) queue_id = event.profile().queue();
  RemoteQueue* queue = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(queue_id);
    if (it != queues_.end()) queue = it->second;
  }
  if (queue == nullptr) return;
  if (event.has_progress()) queue->OnProgress(event.progress().completed());
  if (event.has_queue_failed()) {
    const wire::QueueFailed& failed = event.queue_failed();
    queue->OnFailed(failed.fence(),
                    StatusFromWire(failed.code(), failed.message()));
  }
  if (event.has_read_data()) {
    queue->OnReadData(event.read_data().fence(),
                      std::move(*event.mutable_read_data()->mutable_data()));
  }
  if (event.has_profile()) {
    const wire::Profile& profile = event.profile();
    queue->OnProfile(profile.fence(), {profile.nanoseconds().begin(),
                                       profile.nanoseconds().end()});
  }
}

}  // namespace hrx::backend::remote
