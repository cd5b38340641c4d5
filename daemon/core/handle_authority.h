// Seals and opens owner-branded handles. A sealed handle carries the daemon
// run, the owning session and the object, and a SipHash-2-4 tag over them
// under a 128-bit key drawn from the kernel's random source at start-up, so a
// client can neither forge a handle nor alter one it holds.
//
// Open refuses, each with its own code and reason token:
//   INVALID_ARGUMENT    missing_handle     no handle was sent
//   FAILED_PRECONDITION previous_daemon_run  issued by an earlier daemon run
//   UNAUTHENTICATED     forged_handle      the tag does not authenticate it
//   PERMISSION_DENIED   foreign_handle     it belongs to another session
//   INVALID_ARGUMENT    wrong_handle_kind  it names another kind of object
// A freed object (stale generation) is refused later, by the handle table,
// with NOT_FOUND stale_handle.
//
// Thread-safe (immutable after construction).
#ifndef HRX_DAEMON_CORE_HANDLE_AUTHORITY_H_
#define HRX_DAEMON_CORE_HANDLE_AUTHORITY_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/core/handle_opener.h"
#include "shared/handle.h"
#include "shared/siphash.h"

namespace hrx::daemon {

class HandleAuthority final : public HandleOpener {
 public:
  // A fresh run identity and key from getrandom(2).
  static HandleAuthority FromKernelRandom();
  HandleAuthority(uint64_t instance, const shared::SipKey& key)
      : instance_(instance), key_(key) {}

  shared::WireHandle Seal(uint64_t session, uint64_t object) const override;
  // A session's own handle: session and object are both the session.
  shared::WireHandle SealSession(uint64_t session) const {
    return Seal(session, session);
  }

  // The object of `handle`, a `kind` object of `caller_session`.
  absl::StatusOr<uint64_t> Open(const shared::WireHandle& handle,
                                uint64_t caller_session,
                                shared::HandleKind kind,
                                std::string_view what) const override;
  // The session a session handle names (no caller to compare with yet).
  absl::StatusOr<uint64_t> OpenSession(const shared::WireHandle& handle) const;

  uint64_t instance() const { return instance_; }

 private:
  uint64_t Tag(uint64_t instance, uint64_t session, uint64_t object) const;
  absl::Status Authenticate(const shared::WireHandle& handle,
                            std::string_view what) const;

  uint64_t instance_;
  shared::SipKey key_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_HANDLE_AUTHORITY_H_
