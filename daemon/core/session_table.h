// The open sessions: who may open one, under which tenant, and who may use
// it afterwards. Every other unit finds sessions here.
//
// Contract: a session id names one Session until it is removed; a local
// session belongs to the connection that opened it, a remote one to its
// certificate subject, and VerifyCaller holds every call to that.
//
// Locking: mu_ guards the table only. It is never held while taking a
// Session::mu or calling out of this class.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_SESSION_TABLE_H_
#define HRX_DAEMON_CORE_SESSION_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/core/handle_table.h"
#include "daemon/core/identity.h"
#include "daemon/core/session.h"
#include "daemon/core/session_mirrors.h"
#include "daemon/core/tenants.h"

namespace hrx::daemon {

inline constexpr size_t kMaxSessionTombstones = 4096;

class SessionTable {
 public:
  using Entry = std::pair<uint64_t, std::shared_ptr<Session>>;

  SessionTable(std::shared_ptr<TenantRegistry> tenants, const Clock& clock)
      : tenants_(std::move(tenants)), clock_(clock) {}

  // Opens a session for `caller`, whose tenant the config decides.
  // RESOURCE_EXHAUSTED past kMaxSessions or the tenant's sessions ceiling;
  // INVALID_ARGUMENT for a client name longer than kMaxClientNameBytes or
  // holding control characters; PERMISSION_DENIED for a remote caller no
  // tenant lists.
  absl::StatusOr<uint64_t> Open(const std::string& client_name,
                                const PeerIdentity& caller);
  // Stores `session` under `id`, a session handle hrxd issued: a process
  // serving some of hrxd's sessions (an executor) keeps them under hrxd's
  // ids. FAILED_PRECONDITION when the id is taken or not a session's.
  absl::Status InsertAt(uint64_t id, std::shared_ptr<Session> session);
  // OK when `caller` is on the connection (local) or certificate (remote)
  // that opened `session`: PERMISSION_DENIED "session_not_yours" otherwise,
  // so a leaked session handle is useless. Renews the session's lease.
  absl::Status VerifyCaller(uint64_t session, const PeerIdentity& caller);

  absl::StatusOr<std::shared_ptr<Session>> Find(uint64_t session) const;
  // Takes the session out of the table; its handle dies at once.
  absl::StatusOr<std::shared_ptr<Session>> Remove(uint64_t session,
                                                  std::string_view what);

  // `session` (removed) ended for `why`, not by its client's doing (its
  // executor was lost): a call that still names it, racing the news, is
  // refused with `why` rather than stale_handle. The last
  // kMaxSessionTombstones are kept.
  void Bury(uint64_t session, absl::Status why);

  // The sessions `keep` selects, with their ids (all when `keep` is null).
  std::vector<Entry> Select(
      const std::function<bool(uint64_t, const Session&)>& keep = {}) const;
  size_t size() const;

  TenantRegistry& tenants() const { return *tenants_; }
  // Copies of sessions kept elsewhere (an executor serving their rings):
  // told when an object or a session goes.
  SessionMirrors& mirrors() { return mirrors_; }
  const Clock& clock() const { return clock_; }

 private:
  const std::shared_ptr<TenantRegistry> tenants_;
  const Clock& clock_;
  SessionMirrors mirrors_;
  mutable absl::Mutex mu_;
  // Mutable: lookups resolve handles, which HandleTable does non-const.
  mutable HandleTable<std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_){
      shared::HandleKind::kSession};
  absl::flat_hash_map<uint64_t, absl::Status> tombstones_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> tombstone_order_ ABSL_GUARDED_BY(mu_);  // oldest first
};

// "uid 1000, pid 4242" or "certificate \"CN=x\"", for messages.
std::string DescribeCaller(const PeerIdentity& caller);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_SESSION_TABLE_H_
