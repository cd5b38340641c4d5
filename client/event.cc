#include "hrx/event.h"

#include "client/internal/event_state.h"
#include "shared/status_macros.h"

namespace hrx {
namespace client::internal {

absl::Status EventState::SendRecord(absl::Time deadline) const {
  if (auto stream = stream_.lock()) return stream->Flush(deadline);
  return absl::OkStatus();  // the stream sent everything when it ended
}

EventState::~EventState() {
  // The record, and any other stream's unsent WaitEvent on this event, go
  // before the release: otherwise the daemon refuses that stream's whole
  // batch for an unknown event (found by the load test). On failure the
  // record may never have reached the daemon: nothing to release.
  if (!connection_->FlushAll().ok()) return;
  auto context = connection_->Context();
  hrx::v1::EventRequest request;
  request.set_event(id_);
  hrx::v1::ReleaseEventResponse response;
  (void)connection_->events().ReleaseEvent(context.get(), request, &response);
}

}  // namespace client::internal

absl::StatusOr<bool> Event::IsComplete(absl::Time deadline) const {
  client::internal::Connection& connection = state_->connection();
  deadline = connection.Resolve(deadline);
  HRX_RETURN_IF_ERROR(state_->SendRecord(deadline));
  auto context = connection.Context(deadline);
  hrx::v1::EventRequest request;
  request.set_event(state_->id());
  hrx::v1::QueryEventResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.events().QueryEvent(context.get(), request, &response),
      "an event query"));
  return response.complete();
}

absl::Status Event::Synchronize(absl::Time deadline) const {
  client::internal::Connection& connection = state_->connection();
  deadline = connection.Resolve(deadline);
  HRX_RETURN_IF_ERROR(state_->SendRecord(deadline));
  auto context = connection.Context(deadline);
  hrx::v1::EventRequest request;
  request.set_event(state_->id());
  hrx::v1::SynchronizeEventResponse response;
  return connection.Check(
      connection.events().SynchronizeEvent(context.get(), request, &response),
      "an event's synchronize");
}

uint64_t Event::id() const { return state_->id(); }
uint64_t Event::brand() const { return state_->connection().brand(); }

}  // namespace hrx
