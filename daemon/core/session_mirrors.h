// Processes besides hrxd that keep copies of a session's objects: an
// executor serving the session's rings opens the handles hrxd installed
// there (docs/architecture.md, "Executors"). The core tells them when an
// object or a session goes, before it answers the free or the close, so
// that no copy opens what hrxd no longer holds.
//
// Thread-safe. Never called under a lock of the core's.
#ifndef HRX_DAEMON_CORE_SESSION_MIRRORS_H_
#define HRX_DAEMON_CORE_SESSION_MIRRORS_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace hrx::daemon {

class SessionMirror {
 public:
  virtual ~SessionMirror() = default;
  // `object` of `session` is gone (freed, unloaded): returns once no copy
  // opens it any more (or its holder is lost).
  virtual void Revoke(uint64_t session, uint64_t object) = 0;
  // `session` ended: `why` is what a call still naming it hears (OK: its
  // client closed it). Does not wait: `ended` runs once the copies' work
  // queued for the session has run and what it held is released (or their
  // holder is lost), at once where nothing mirrors it; on any thread, never
  // under the caller's locks.
  virtual void EndSession(uint64_t session, const absl::Status& why,
                          std::function<void()> ended) = 0;
  // Before refusing `session` for its budget: waits, bounded, until each
  // copy holding objects of `session` it was told to let go of has reported
  // what it released so far, so that memory a completed use has freed (the
  // client may have seen that completion first: a copy answers its own
  // rings) counts as free. At once where nothing is pending.
  virtual void SettleReleases(uint64_t session) = 0;
};

// The core's way to its mirror, set once by whoever serves sessions
// elsewhere (none: nothing is mirrored). Calls into the mirror hold a
// reader lock, so Set waits until none is in progress.
class SessionMirrors final : public SessionMirror {
 public:
  // Waits for calls into the previous mirror to return (so it may be
  // destroyed once Set(nullptr) has).
  void Set(SessionMirror* mirror) {
    absl::WriterMutexLock lock(&mu_);
    mirror_ = mirror;
  }

  void Revoke(uint64_t session, uint64_t object) override {
    absl::ReaderMutexLock lock(&mu_);
    if (mirror_ != nullptr) mirror_->Revoke(session, object);
  }
  void SettleReleases(uint64_t session) override {
    absl::ReaderMutexLock lock(&mu_);
    if (mirror_ != nullptr) mirror_->SettleReleases(session);
  }
  void EndSession(uint64_t session, const absl::Status& why,
                  std::function<void()> ended) override {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (mirror_ != nullptr) {
        return mirror_->EndSession(session, why, std::move(ended));
      }
    }
    ended();
  }

 private:
  absl::Mutex mu_;
  SessionMirror* mirror_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_SESSION_MIRRORS_H_
