// Processes besides hrxd that keep copies of a session's objects: an
// executor serving the session's rings opens the handles hrxd installed
// there (docs/architecture.md, "Executors"). The core tells them when an
// object or a session goes, before it answers the free or the close, so
// that no copy opens what hrxd no longer holds.
//
// Thread-safe. Never called under a lock of the core's.
#ifndef HRX_DAEMON_CORE_SESSION_MIRRORS_H_
#define HRX_DAEMON_CORE_SESSION_MIRRORS_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"

namespace hrx::daemon {

class SessionMirror {
 public:
  virtual ~SessionMirror() = default;
  // `object` of `session` is gone (freed, unloaded): returns once no copy
  // opens it any more (or its holder is lost).
  virtual void Revoke(uint64_t session, uint64_t object) = 0;
  // `session` ended: `why` is what a call still naming it hears (OK: its
  // client closed it). Does not wait.
  virtual void EndSession(uint64_t session, const absl::Status& why) = 0;
};

// The core's way to its mirror, set once by whoever serves sessions
// elsewhere (none: nothing is mirrored). The mirror outlives the core's
// use of it.
class SessionMirrors final : public SessionMirror {
 public:
  void Set(SessionMirror* mirror) { mirror_.store(mirror); }

  void Revoke(uint64_t session, uint64_t object) override {
    if (SessionMirror* mirror = mirror_.load()) mirror->Revoke(session, object);
  }
  void EndSession(uint64_t session, const absl::Status& why) override {
    if (SessionMirror* mirror = mirror_.load())
      mirror->EndSession(session, why);
  }

 private:
  std::atomic<SessionMirror*> mirror_{nullptr};
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_SESSION_MIRRORS_H_
