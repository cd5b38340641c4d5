// What opens and seals the handles a session sends and receives: the one
// question every decoder of a call asks. hrxd's opener is its
// HandleAuthority, which holds the key and can authenticate any handle. A
// process serving a session's stream without the key (an executor) opens
// only the handles hrxd installed there, by exact match, and asks hrxd why
// any other is refused, so its refusals are the same
// (daemon/executor/installed_handles.h).
#ifndef HRX_DAEMON_CORE_HANDLE_OPENER_H_
#define HRX_DAEMON_CORE_HANDLE_OPENER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "shared/handle.h"

namespace hrx::daemon {

class HandleOpener {
 public:
  virtual ~HandleOpener() = default;

  // The sealed handle of `object`, an object of `session`.
  virtual shared::WireHandle Seal(uint64_t session, uint64_t object) const = 0;
  // The object of `handle`, a `kind` object of `caller_session`, or the
  // refusal (missing, previous run, forged, foreign, wrong kind: see
  // handle_authority.h). `what` names the use in the refusal.
  virtual absl::StatusOr<uint64_t> Open(const shared::WireHandle& handle,
                                        uint64_t caller_session,
                                        shared::HandleKind kind,
                                        std::string_view what) const = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_HANDLE_OPENER_H_
