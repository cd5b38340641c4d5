// libhrx events: immutable completion points of a stream's published work,
// mirroring the in-process runtime's Event.
//
// Threading: Event is a copyable value; copies share one daemon event, which
// is released when the last copy goes.
#ifndef HRX_CLIENT_INCLUDE_HRX_EVENT_H_
#define HRX_CLIENT_INCLUDE_HRX_EVENT_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hrx {

// A blocking call's deadline when none is given: now + default_timeout.
inline constexpr absl::Time kDefaultDeadline = absl::InfinitePast();

namespace client::internal {
class EventState;
}  // namespace client::internal

class Event {
 public:
  // Polls completion without waiting. Sends the recording stream's pending
  // commands first, so it observes everything recorded before the event.
  absl::StatusOr<bool> IsComplete(absl::Time deadline = kDefaultDeadline) const;
  // Waits on the host for the recorded work, until `deadline` (stream.h).
  absl::Status Synchronize(absl::Time deadline = kDefaultDeadline) const;

  uint64_t id() const;
  uint64_t brand() const;

 private:
  friend class Stream;
  explicit Event(std::shared_ptr<client::internal::EventState> state)
      : state_(std::move(state)) {}
  std::shared_ptr<client::internal::EventState> state_;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_EVENT_H_
