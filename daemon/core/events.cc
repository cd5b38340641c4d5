#include "daemon/core/events.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

absl::StatusOr<bool> Events::Query(uint64_t session, uint64_t event) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  auto it = owner->events.find(event);
  if (it == owner->events.end()) {
    return Refusal(
        Reason::kUnknownEvent,
        absl::StrFormat("query event %u: this session has no such event. "
                        "Fix: query events recorded by this session's streams.",
                        event));
  }
  if (it->second.queue == nullptr) return false;
  return it->second.queue->completed() >= it->second.fence;
}

void Events::Synchronize(uint64_t session, uint64_t event, DoneCallback done) {
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  EventEntry entry;
  bool known = false;
  {
    absl::MutexLock lock(&(*owner)->mu);
    auto it = (*owner)->events.find(event);
    known = it != (*owner)->events.end() && it->second.queue != nullptr;
    if (known) entry = it->second;
  }
  // Answered outside the session's lock: `done` may call out (a refusal
  // here is put to an executor that serves the session's rings).
  if (!known) {
    return done(Refusal(
        Reason::kUnknownEvent,
        absl::StrFormat("synchronize event %u: this session has no such "
                        "published event. Fix: synchronize events recorded "
                        "by this session's streams.",
                        event)));
  }
  entry.queue->OnComplete(entry.fence, std::move(done));
}

absl::Status Events::Release(uint64_t session, uint64_t event) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  if (owner->events.erase(event) == 0) {
    return Refusal(
        Reason::kUnknownEvent,
        absl::StrFormat("release event %u: this session has no such event. "
                        "Fix: release each recorded event once.",
                        event));
  }
  return absl::OkStatus();
}

}  // namespace hrx::daemon
