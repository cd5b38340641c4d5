// The handles an executor may open for the sessions whose streams it
// serves: exactly those hrxd installed there, each matched on all four of
// its sealed fields (daemon run, session, object, tag). The executor needs
// no key, and tenant code, which runs in the executor and can read this
// table, finds only handles its own sessions already hold.
//
// Any other handle (never installed, revoked, of another session, altered,
// of another kind) is refused with hrxd's own answer: `ask` puts the
// question to hrxd, whose authority and tables give exactly the refusal a
// call to hrxd would get. hrxd may instead vouch for a handle not yet
// installed (it then names the handle's object), which is installed then,
// unless a revocation came while hrxd was asked.
// So an installed handle costs nothing to open, and a miss one round trip.
//
// Thread-safe. `ask` is called without the table's lock.
#ifndef HRX_DAEMON_EXECUTOR_INSTALLED_HANDLES_H_
#define HRX_DAEMON_EXECUTOR_INSTALLED_HANDLES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/handle_opener.h"
#include "shared/handle.h"

namespace hrx::executor {

class InstalledHandles final : public daemon::HandleOpener {
 public:
  // hrxd's answer for a handle not installed here: the object it names, or
  // the refusal.
  using Ask = std::function<absl::StatusOr<uint64_t>(
      const shared::WireHandle& handle, uint64_t caller_session,
      shared::HandleKind kind, std::string_view what)>;

  explicit InstalledHandles(Ask ask) : ask_(std::move(ask)) {}

  // hrxd installed `handle`, sealed for its session and object.
  void Install(const shared::WireHandle& handle);
  // The object is gone (freed, its grant revoked): its handle opens no more.
  void Revoke(uint64_t session, uint64_t object);
  // The session ended: none of its handles open.
  void RevokeSession(uint64_t session);
  // How many handles are installed, over every session.
  size_t size() const;

  // The handle hrxd installed for `object` of `session`; an empty one (which
  // opens nowhere: missing_handle) where it installed none.
  shared::WireHandle Seal(uint64_t session, uint64_t object) const override;
  absl::StatusOr<uint64_t> Open(const shared::WireHandle& handle,
                                uint64_t caller_session,
                                shared::HandleKind kind,
                                std::string_view what) const override;

 private:
  const Ask ask_;
  mutable absl::Mutex mu_;
  // By session, then object: the handle hrxd sealed for it. Mutable: a
  // handle hrxd vouches for in Open is installed then.
  mutable absl::flat_hash_map<uint64_t,
                              absl::flat_hash_map<uint64_t, shared::WireHandle>>
      sessions_ ABSL_GUARDED_BY(mu_);
  // Revocations so far: a handle hrxd vouched for is kept only if none came
  // while it was asked (it could have been revoked meanwhile).
  uint64_t revocations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_INSTALLED_HANDLES_H_
