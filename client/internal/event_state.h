// An event's client side: its session-scoped id, the stream that recorded it
// (whose pending commands must be sent before observing it), and release of
// the daemon's event when the last copy goes.
#ifndef HRX_CLIENT_INTERNAL_EVENT_STATE_H_
#define HRX_CLIENT_INTERNAL_EVENT_STATE_H_

#include <cstdint>
#include <memory>

#include "client/internal/connection.h"
#include "client/internal/stream_state.h"

namespace hrx::client::internal {

class EventState {
 public:
  EventState(std::shared_ptr<Connection> connection,
             std::weak_ptr<StreamState> stream, uint64_t id)
      : connection_(std::move(connection)),
        stream_(std::move(stream)),
        id_(id) {}
  ~EventState();  // releases the daemon's event, after the record was sent

  // Sends the recording stream's pending commands, acknowledged.
  absl::Status SendRecord(absl::Time deadline) const;

  Connection& connection() const { return *connection_; }
  uint64_t id() const { return id_; }

 private:
  const std::shared_ptr<Connection> connection_;
  const std::weak_ptr<StreamState> stream_;
  const uint64_t id_;
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_EVENT_STATE_H_
