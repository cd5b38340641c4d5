// Events: fences a stream recorded (Command record_event), queried, waited
// for and released by id. Recording and cross-stream waits are commands
// (command_path.h); this unit answers for recorded events.
//
// Contract: an event id names one fence from the batch that recorded it
// until it is released; an event whose batch is still being enqueued is not
// yet published and cannot be waited for.
//
// Locking: takes a Session::mu briefly; waits through the queue's
// completion callbacks, never by blocking.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_EVENTS_H_
#define HRX_DAEMON_CORE_EVENTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/session_table.h"
#include "daemon/core/stream_gate.h"

namespace hrx::daemon {

class Events {
 public:
  explicit Events(SessionTable& sessions) : sessions_(sessions) {}

  // Without waiting: whether the event's fence has completed.
  absl::StatusOr<bool> Query(uint64_t session, uint64_t event);
  // `done` runs once the event's fence has completed.
  void Synchronize(uint64_t session, uint64_t event, DoneCallback done);
  absl::Status Release(uint64_t session, uint64_t event);

 private:
  SessionTable& sessions_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_EVENTS_H_
