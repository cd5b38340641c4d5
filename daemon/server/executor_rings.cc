#include "daemon/server/executor_rings.h"

#include <sys/mman.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/backend/remote/remote_backend.h"
#include "daemon/backend/remote/remote_queue.h"
#include "daemon/stream/ring_server.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

namespace wire = hrx::executor::v1;
using backend::remote::ExecutorLink;

void SetSealed(const shared::WireHandle& handle, wire::SealedHandle* out) {
  out->set_instance(handle.instance);
  out->set_session(handle.session);
  out->set_object(handle.object);
  out->set_tag(handle.tag);
}

shared::WireHandle FromWire(const wire::SealedHandle& handle) {
  return shared::WireHandle{handle.instance(), handle.session(),
                            handle.object(), handle.tag()};
}

}  // namespace

// Past this, a Released frame is no executor's honest report (it names at
// most what one session had installed, bounded by the tenant's ceilings).
constexpr int kMaxReleasedPerFrame = 1 << 16;
// The longest `what` an ask may carry into a refusal hrxd echoes.
constexpr size_t kMaxAskWhatBytes = 128;
// Event and stream calls of one session waiting for its executor's answer.
constexpr size_t kMaxForwardedCallsPerSession = 1024;

ExecutorRings::ExecutorRings(Core& core) : core_(core) {
  {
    absl::MutexLock lock(&gate_->mu);
    gate_->self = this;
  }
  core_.sessions().mirrors().Set(this);
}

ExecutorRings::~ExecutorRings() {
  // No core thread is inside once this returns.
  core_.sessions().mirrors().Set(nullptr);
  {
    absl::MutexLock lock(&mu_);
    for (const auto& weak : links_) {
      if (auto link = weak.lock()) link->SetControlHandler(nullptr);
    }
  }
  // Nor any delivery thread, which may have copied a handler before it was
  // cleared.
  {
    absl::MutexLock lock(&gate_->mu);
    gate_->self = nullptr;
    gate_->mu.Await(absl::Condition(
        +[](int* active) { return *active == 0; }, &gate_->active));
  }
  // hrxd is stopping: closes still waiting for an executor's word are done
  // (the executors go with hrxd).
  absl::flat_hash_map<uint64_t, Ending> ending;
  {
    absl::MutexLock lock(&mu_);
    ending.swap(ending_);
  }
  for (auto& [session, waiting] : ending) waiting.ended();
}

void ExecutorRings::ThroughGate(
    const std::shared_ptr<Gate>& gate,
    const std::function<void(ExecutorRings&)>& call) {
  ExecutorRings* self;
  {
    absl::MutexLock lock(&gate->mu);
    self = gate->self;
    if (self == nullptr) return;
    ++gate->active;
  }
  call(*self);
  absl::MutexLock lock(&gate->mu);
  --gate->active;
}

std::shared_ptr<ExecutorLink> ExecutorRings::LinkOf(uint64_t session,
                                                    uint64_t stream) {
  auto queue = core_.commands().StreamQueue(session, stream);
  if (!queue.ok()) return nullptr;
  auto* remote = dynamic_cast<backend::remote::RemoteQueue*>(queue->get());
  return remote == nullptr ? nullptr : remote->link();
}

absl::Status ExecutorRings::OpenThere(const std::shared_ptr<ExecutorLink>& link,
                                      uint64_t session) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner,
                       core_.sessions().Find(session));
  std::shared_ptr<absl::Mutex> order;
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    if (it != served_.end() && it->second.link != link) {
      // The session's executor was replaced: its sessions end with the
      // loss, so this one is on its way out.
      return link->lost().ok() ? it->second.link->lost() : link->lost();
    }
    if (it == served_.end()) {
      Served fresh;
      fresh.link = link;
      fresh.order = std::make_shared<absl::Mutex>();
      it = served_.emplace(session, std::move(fresh)).first;
    }
    order = it->second.order;
    // Links of executors gone since are forgotten here.
    links_.erase(std::remove_if(links_.begin(), links_.end(),
                                [](const std::weak_ptr<ExecutorLink>& weak) {
                                  return weak.expired();
                                }),
                 links_.end());
    bool known = false;
    for (const auto& weak : links_) known = known || weak.lock() == link;
    if (!known) {
      links_.push_back(link);
      std::weak_ptr<ExecutorLink> weak = link;
      link->SetControlHandler(
          [gate = gate_, weak](const wire::Event& event) {
            ThroughGate(gate, [&](ExecutorRings& self) {
              self.OnControl(weak, event);
            });
          },
          [gate = gate_, weak] {
            ThroughGate(gate, [&](ExecutorRings& self) {
              if (auto lost = weak.lock()) self.OnLost(lost);
            });
          });
    }
  }
  // One opening per session at a time, under its own lock (never hrxd's
  // others: an executor that does not answer holds up its session only).
  absl::MutexLock ordered(order.get());
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    if (it != served_.end() && it->second.order == order && it->second.opened) {
      return absl::OkStatus();
    }
  }
  wire::Request request;
  wire::OpenSession* open = request.mutable_open_session();
  open->set_session(session);
  open->set_tenant(owner->tenant->name());
  *open->mutable_budget() = BudgetFromLimits(owner->tenant->limits());
  auto answered = link->Call(std::move(request));
  absl::Status opened =
      !answered.ok()
          ? answered.status()
          : absl::Status(static_cast<absl::StatusCode>(answered->reply.code()),
                         answered->reply.message());
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    const bool still_here = it != served_.end() && it->second.order == order;
    if (!opened.ok()) {
      if (still_here) served_.erase(it);
      return opened;
    }
    if (still_here) {
      it->second.opened = true;
      // A close that ran before the entry existed told nobody here: the
      // session is gone from hrxd's table by then, so look again.
      if (core_.sessions().Find(session).ok()) return absl::OkStatus();
      served_.erase(it);
    }
  }
  // It ended while it was being opened there: end it there too.
  wire::Request end;
  end.mutable_end_session()->set_session(session);
  link->Post(end);
  absl::Status gone = core_.sessions().Find(session).status();
  return gone.ok() ? Refusal(Reason::kSessionClosed,
                             "open ring: the session ended while its ring "
                             "was handed over. Fix: open a new session.")
                   : gone;
}

absl::Status ExecutorRings::HandOver(const std::shared_ptr<ExecutorLink>& link,
                                     uint64_t session,
                                     const hrx::v1::Handle& sealed,
                                     uint64_t stream_id,
                                     shared::UniqueFd region, void* base,
                                     uint64_t region_bytes, ChargeRef hold,
                                     std::shared_ptr<const void> slot) {
  auto handed = std::make_shared<HandedRing>(std::move(hold), base,
                                             region_bytes, std::move(slot));
  HRX_RETURN_IF_ERROR(OpenThere(link, session));
  wire::Request request;
  wire::ServeRing* serve = request.mutable_serve_ring();
  serve->set_session(session);
  SetSealed(shared::WireHandle{sealed.instance(), sealed.session(),
                               sealed.object(), sealed.tag()},
            serve->mutable_stream());
  serve->set_stream_id(stream_id);
  serve->set_region_bytes(region_bytes);
  auto answered = link->Call(std::move(request), std::move(region));
  if (!answered.ok()) return answered.status();
  if (answered->reply.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(answered->reply.code()),
                        answered->reply.message());
  }
  absl::MutexLock lock(&mu_);
  // StopAll ran meanwhile: this ring is told of the stop too, as those it
  // found were, before the links close (else its executor would call the
  // end hrxd's death).
  if (stopping_) {
    FinishRingRegion(handed->base, HrxdStopping());
  }
  auto it = served_.find(session);
  // Ended meanwhile: the hold goes now (the executor's ring ends with it).
  if (it != served_.end())
    it->second.holds[sealed.object()] = std::move(handed);
  return absl::OkStatus();
}

void ExecutorRings::SettleReleases(uint64_t session) {
  std::vector<std::shared_ptr<ExecutorLink>> links;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, queue] : releasing_) {
      if (key.first != session) continue;
      for (const Releasing& releasing : queue) {
        std::shared_ptr<ExecutorLink> link = releasing.link.lock();
        if (link != nullptr &&
            std::find(links.begin(), links.end(), link) == links.end()) {
          links.push_back(std::move(link));
        }
      }
    }
  }
  if (links.empty()) return;
  const absl::Time deadline = absl::Now() + backend::remote::kReportWait;
  std::vector<std::pair<std::shared_ptr<ExecutorLink>, uint64_t>> asked;
  for (auto& link : links) {
    const uint64_t id = link->AskReport();
    asked.emplace_back(std::move(link), id);
  }
  for (auto& [link, id] : asked) link->AwaitReport(id, deadline);
}

void ExecutorRings::Revoke(uint64_t session, uint64_t object) {
  std::shared_ptr<ExecutorLink> link;
  std::shared_ptr<absl::Mutex> order;
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    if (it == served_.end()) return;
    link = it->second.link;
    order = it->second.order;
  }
  wire::Request request;
  request.mutable_revoke()->set_session(session);
  request.mutable_revoke()->set_object(object);
  absl::MutexLock ordered(order.get());
  {
    // Set aside before the executor hears of it (its Released may come
    // before its reply): kept until the executor reports it released, as
    // it does for every revocation, held or not.
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    if (it == served_.end()) return;
    auto installed = it->second.installed.find(object);
    if (installed != it->second.installed.end()) {
      releasing_[{session, object}].push_back(
          Releasing{link, std::move(installed->second)});
      it->second.installed.erase(installed);
    }
  }
  // Answered once no table there opens it; a lost executor holds nothing
  // (its sessions end with it, and what it was given is let go then).
  (void)link->Call(std::move(request));
}

bool ExecutorRings::CallEvent(uint64_t session, uint64_t event,
                              wire::EventCall::Op op, EventDone done) {
  wire::EventCall call;
  call.set_session(session);
  call.set_event(event);
  call.set_op(op);
  return Put(
      session, /*stream=*/0, std::move(call),
      [done = std::move(done)](absl::StatusOr<wire::EventAnswer> answer) {
        if (!answer.ok()) return done(answer.status());
        done(answer->complete());
      });
}

bool ExecutorRings::ServesStream(uint64_t session, uint64_t stream) const {
  absl::MutexLock lock(&mu_);
  auto it = served_.find(session);
  return it != served_.end() && it->second.holds.contains(stream);
}

bool ExecutorRings::CallStream(uint64_t session, uint64_t stream,
                               wire::EventCall::Op op, AnswerDone done) {
  wire::EventCall call;
  call.set_session(session);
  call.set_stream(stream);
  call.set_op(op);
  return Put(session, stream, std::move(call), std::move(done));
}

bool ExecutorRings::Put(uint64_t session, uint64_t stream, wire::EventCall call,
                        AnswerDone done) {
  wire::Request request;
  std::shared_ptr<ExecutorLink> link;
  bool full = false;  // at the cap: refused, outside the lock
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(session);
    if (it == served_.end()) return false;
    if (stream != 0 && !it->second.holds.contains(stream)) return false;
    full = it->second.calls >= kMaxForwardedCallsPerSession;
    if (!full) {
      ++it->second.calls;
      link = it->second.link;
      const uint64_t id = next_event_call_++;
      event_calls_[id] = EventCallWaiting{session, link, std::move(done)};
      call.set_call(id);
      *request.mutable_event_call() = std::move(call);
    }
  }
  if (full) {
    done(Refusal(Reason::kTooManyCalls,
                 absl::StrFormat("%u calls of this session wait for its "
                                 "executor's answer (at most %u). Fix: wait "
                                 "for them before sending more.",
                                 kMaxForwardedCallsPerSession,
                                 kMaxForwardedCallsPerSession)));
    return true;
  }
  // A lost link answers nothing: the session's end (which the loss brings)
  // fails the call.
  link->Post(request);
  return true;
}

void ExecutorRings::OnLost(const std::shared_ptr<ExecutorLink>& link) {
  std::vector<std::shared_ptr<const void>> going;  // let go outside the lock
  std::vector<std::function<void()>> ended;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = releasing_.begin(); it != releasing_.end();) {
      std::deque<Releasing>& queue = it->second;
      for (auto entry = queue.begin(); entry != queue.end();) {
        auto holder = entry->link.lock();
        if (holder == nullptr || holder == link) {
          going.push_back(std::move(entry->keep));
          entry = queue.erase(entry);
        } else {
          ++entry;
        }
      }
      if (queue.empty()) {
        releasing_.erase(it++);
      } else {
        ++it;
      }
    }
    for (auto it = ending_.begin(); it != ending_.end();) {
      auto holder = it->second.link.lock();
      if (holder == nullptr || holder == link) {
        // Its rings ended with the executor, without a word to their
        // clients: hrxd tells them why.
        for (const auto& [stream, ring] : it->second.holds) {
          FinishRingRegion(ring->base, link->lost());
          going.push_back(ring);
        }
        ended.push_back(std::move(it->second.ended));
        ending_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& done : ended) done();
}

size_t ExecutorRings::releasing() const {
  absl::MutexLock lock(&mu_);
  return releasing_.size();
}

void ExecutorRings::EndSession(uint64_t session, const absl::Status& why,
                               std::function<void()> done) {
  Served ended;
  std::vector<AnswerDone> unanswered;  // failed outside the lock
  bool waiting = false;                // for the executor's word
  {
    absl::MutexLock lock(&mu_);
    for (auto it = event_calls_.begin(); it != event_calls_.end();) {
      if (it->second.session != session) {
        ++it;
        continue;
      }
      unanswered.push_back(std::move(it->second.done));
      event_calls_.erase(it++);
    }
    auto it = served_.find(session);
    if (it != served_.end()) {
      ended = std::move(it->second);
      served_.erase(it);
    }
    // Everything it installed stays until the executor has run the
    // session's queued work, and the close waits for that. A lost link
    // has run its last (its loss was or will be handled: OnLost runs
    // after lost() stops being OK).
    if (ended.link != nullptr && ended.link->lost().ok()) {
      for (auto& [object, keep] : ended.installed) {
        releasing_[{session, object}].push_back(
            Releasing{ended.link, std::move(keep)});
      }
      // Stopping, nothing waits for the executor (StopAll).
      if (!stopping_) {
        // Its rings' regions (their charges and cap slots) stay held until
        // the executor says the session's work there is done.
        ending_[session] =
            Ending{ended.link, std::move(done), std::exchange(ended.holds, {}),
                   ended.link->Expect(absl::Now() +
                                      backend::remote::kSessionEndLimit)};
        waiting = true;
      }
    }
  }
  for (AnswerDone& call : unanswered) {
    call(!why.ok() ? why
                   : Refusal(Reason::kSessionClosed,
                             "event: the session closed while the call "
                             "waited. Fix: open a new session."));
  }
  if (!waiting) {
    // Nothing of it runs in an executor (any more). A lost executor ended
    // its rings without a word to their clients: hrxd tells them why.
    if (ended.link != nullptr && !ended.link->lost().ok()) {
      for (const auto& [stream, ring] : ended.holds) {
        FinishRingRegion(ring->base, ended.link->lost());
      }
    }
    if (ended.link != nullptr && ended.link->lost().ok()) {
      wire::Request request;
      wire::EndSession* end = request.mutable_end_session();
      end->set_session(session);
      end->set_code(static_cast<int>(why.code()));
      end->set_message(std::string(why.message()));
      ended.link->Post(request);
    }
    return done();
  }
  // (Lost since: OnLost ends its rings for their clients and the wait.)
  wire::Request request;
  wire::EndSession* end = request.mutable_end_session();
  end->set_session(session);
  end->set_code(static_cast<int>(why.code()));
  end->set_message(std::string(why.message()));
  if (ended.link->lost().ok()) ended.link->Post(request);
}

ExecutorRings::HandedRing::~HandedRing() { munmap(base, bytes); }

void ExecutorRings::StopAll() {
  const absl::Status stopping = HrxdStopping();
  // Nothing waits for an executor's word from here (gRPC's shutdown waits
  // for every call): calls waiting for an answer fail, closes are done.
  std::vector<AnswerDone> unanswered;
  absl::flat_hash_map<uint64_t, Ending> ending;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [session, served] : served_) {
      for (const auto& [stream, ring] : served.holds) {
        FinishRingRegion(ring->base, stopping);
      }
    }
    for (auto& [id, call] : event_calls_) {
      unanswered.push_back(std::move(call.done));
    }
    event_calls_.clear();
    ending.swap(ending_);
  }
  for (AnswerDone& done : unanswered) done(stopping);
  for (auto& [session, waiting] : ending) waiting.ended();
}

size_t ExecutorRings::sessions() const {
  absl::MutexLock lock(&mu_);
  return served_.size();
}

void ExecutorRings::OnControl(const std::weak_ptr<ExecutorLink>& weak,
                              const wire::Event& event) {
  std::shared_ptr<ExecutorLink> link = weak.lock();
  if (link == nullptr) return;
  if (event.has_ask()) return Answer(link, event.ask());
  if (event.has_event_answer()) {
    const wire::EventAnswer& answer = event.event_answer();
    AnswerDone done;
    {
      absl::MutexLock lock(&mu_);
      auto it = event_calls_.find(answer.call());
      // Only the executor asked may answer.
      if (it == event_calls_.end() || it->second.link.lock() != link) return;
      done = std::move(it->second.done);
      auto served = served_.find(it->second.session);
      if (served != served_.end() && served->second.calls > 0) {
        --served->second.calls;
      }
      event_calls_.erase(it);
    }
    if (answer.code() != 0) {
      done(absl::Status(static_cast<absl::StatusCode>(answer.code()),
                        answer.message()));
    } else {
      done(answer);
    }
    return;
  }
  if (event.has_released()) {
    if (event.released().objects_size() > kMaxReleasedPerFrame) {
      link->Lose(Refusal(
          Reason::kExecutorLost,
          absl::StrFormat("the executor reported %d objects released at "
                          "once (at most %d) and was killed. Fix: none (a "
                          "broken or hostile executor).",
                          event.released().objects_size(),
                          kMaxReleasedPerFrame)));
      return;
    }
    std::function<void()> closed;  // run outside the lock, after `going`
    {
      std::vector<std::shared_ptr<const void>> going;  // outside the lock
      absl::MutexLock lock(&mu_);
      const uint64_t session = event.released().session();
      for (uint64_t object : event.released().objects()) {
        auto it = releasing_.find({session, object});
        // Only what this executor was given, oldest revocation first.
        if (it == releasing_.end() || it->second.front().link.lock() != link) {
          continue;
        }
        going.push_back(std::move(it->second.front().keep));
        it->second.pop_front();
        if (it->second.empty()) releasing_.erase(it);
      }
      auto ending = ending_.find(session);
      // Only the executor the session was ended in may say it has.
      if (event.released().session_ended() && ending != ending_.end() &&
          ending->second.link.lock() == link) {
        closed = std::move(ending->second.ended);
        link->Kept(ending->second.promise);
        for (auto& [stream, ring] : ending->second.holds) {
          going.push_back(std::move(ring));
        }
        ending_.erase(ending);
      }
    }
    if (closed) closed();
    return;
  }
  if (event.has_ring_ended()) {
    const wire::RingEnded& ended = event.ring_ended();
    std::shared_ptr<HandedRing> hold;  // given back outside the lock
    {
      absl::MutexLock lock(&mu_);
      auto it = served_.find(ended.session());
      // Only a stream hrxd handed to this executor: no other stream is its
      // to end.
      if (it == served_.end() || it->second.link != link) return;
      auto held = it->second.holds.find(ended.stream());
      if (held == it->second.holds.end()) return;
      hold = std::move(held->second);
      it->second.holds.erase(held);
    }
    // hrxd's side of the stream (its handle, its stream charge) and the
    // region's charge go, as when hrxd's own ring ends. (An executor that
    // says so early gives back only its own tenant's charges.)
    core_.commands().DestroyStream(ended.session(), ended.stream(),
                                   [](absl::Status) {});
  }
}

absl::StatusOr<std::pair<wire::InstalledObject, std::shared_ptr<const void>>>
ExecutorRings::Describe(const std::shared_ptr<ExecutorLink>& link,
                        const wire::Ask& ask) {
  const auto kind = static_cast<shared::HandleKind>(ask.kind());
  HRX_ASSIGN_OR_RETURN(uint64_t object,
                       core_.handles().Open(FromWire(ask.handle()),
                                            ask.session(), kind, ask.what()));
  wire::InstalledObject install;
  *install.mutable_handle() = ask.handle();
  switch (kind) {
    case shared::HandleKind::kBuffer: {
      HRX_ASSIGN_OR_RETURN(
          Buffers::Described buffer,
          core_.buffers().Describe(ask.session(), object, ask.what()));
      HRX_ASSIGN_OR_RETURN(uint64_t memory,
                           backend::remote::RemoteIdOf(buffer.memory, link));
      install.mutable_buffer()->set_memory(memory);
      install.mutable_buffer()->set_origin_stream(buffer.origin_stream);
      return std::make_pair(std::move(install),
                            std::shared_ptr<const void>(buffer.memory));
    }
    case shared::HandleKind::kKernel: {
      HRX_ASSIGN_OR_RETURN(
          backend::KernelRef kernel,
          core_.kernels().Find(ask.session(), object, ask.what()));
      HRX_ASSIGN_OR_RETURN(uint64_t id,
                           backend::remote::RemoteIdOf(kernel, *link));
      install.mutable_kernel()->set_kernel(id);
      return std::make_pair(std::move(install),
                            std::shared_ptr<const void>(kernel));
    }
    case shared::HandleKind::kGraphExec: {
      HRX_ASSIGN_OR_RETURN(
          GraphExecEntry exec,
          core_.graphs().Describe(ask.session(), object, ask.what()));
      // Defined there ahead of this answer, on the same socket.
      HRX_ASSIGN_OR_RETURN(uint64_t graph,
                           backend::remote::GraphOn(exec.plan, link));
      wire::InstalledExec* out = install.mutable_exec();
      out->set_graph(graph);
      out->set_stream_id(exec.stream_id);
      out->set_profiled(exec.profiled);
      for (const std::string& label : exec.labels) out->add_labels(label);
      return std::make_pair(std::move(install),
                            std::shared_ptr<const void>(exec.plan));
    }
    default:
      return Refusal(
          Reason::kNotServedByExecutor,
          absl::StrFormat(
              "%s: a %s is not served by a ring in an executor (buffers, "
              "kernels and graph execs are). Fix: run hrxd without "
              "--executor_rings, or use this stream over Streams.Open "
              "(HRX_TRANSPORT=grpc).",
              ask.what(), shared::HandleKindName(kind)));
  }
}

void ExecutorRings::Answer(const std::shared_ptr<ExecutorLink>& link,
                           const wire::Ask& asked) {
  // Its `what` is echoed in refusals: bounded, so no ask makes a large
  // answer.
  wire::Ask ask = asked;
  if (ask.what().size() > kMaxAskWhatBytes)
    ask.mutable_what()->resize(kMaxAskWhatBytes);
  std::shared_ptr<absl::Mutex> order;
  {
    absl::MutexLock lock(&mu_);
    auto it = served_.find(ask.session());
    if (it != served_.end() && it->second.link == link) {
      order = it->second.order;
    }
  }
  wire::Request request;
  wire::AskAnswer* answer = request.mutable_ask_answer();
  answer->set_ask(ask.ask());
  if (order == nullptr) {
    // Not a session hrxd handed to this executor: it learns nothing.
    const absl::Status refused = Refusal(
        Reason::kForeignHandle,
        "executor ask: the session is not served by this executor. Fix: "
        "none (an executor asks only about its own sessions).");
    answer->set_code(static_cast<int>(refused.code()));
    answer->set_message(std::string(refused.message()));
    link->Post(request);
    return;
  }
  // Described and sent under the session's order, so a revocation decided
  // after this description reaches the executor after this answer.
  absl::MutexLock ordered(order.get());
  auto described = Describe(link, ask);
  if (!described.ok()) {
    answer->set_code(static_cast<int>(described.status().code()));
    answer->set_message(std::string(described.status().message()));
    link->Post(request);
    return;
  }
  std::shared_ptr<const void> replaced;  // let go outside the lock
  absl::MutexLock lock(&mu_);
  auto it = served_.find(ask.session());
  if (it == served_.end()) {
    // Ended since it was described: nothing to install, and the executor
    // hears of the end.
    const absl::Status ended =
        Refusal(Reason::kSessionClosed,
                "executor ask: the session ended. Fix: open a new session.");
    answer->set_code(static_cast<int>(ended.code()));
    answer->set_message(std::string(ended.message()));
  } else {
    *answer->mutable_install() = std::move(described->first);
    replaced = std::exchange(it->second.installed[ask.handle().object()],
                             std::move(described->second));
  }
  // Sent under the lock (a send never waits), so a session's end, which
  // takes it, reaches the executor after this answer, never before.
  link->Post(request);
}

}  // namespace hrx::daemon
