#include "hrx/event.h"

#include "client/internal/event_state.h"
#include "shared/status_macros.h"

namespace hrx {
namespace client::internal {

absl::Status EventState::SendRecord() const {
  if (auto stream = stream_.lock()) return stream->Flush();
  return absl::OkStatus();  // the stream sent everything when it ended
}

EventState::~EventState() {
  if (!SendRecord().ok()) return;  // the record never reached the daemon
  auto context = connection_->Context();
  hrx::v1::EventRequest request;
  request.set_event(id_);
  hrx::v1::ReleaseEventResponse response;
  (void)connection_->events().ReleaseEvent(context.get(), request, &response);
}

}  // namespace client::internal

absl::StatusOr<bool> Event::IsComplete() const {
  HRX_RETURN_IF_ERROR(state_->SendRecord());
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::EventRequest request;
  request.set_event(state_->id());
  hrx::v1::QueryEventResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.events().QueryEvent(context.get(), request, &response)));
  return response.complete();
}

absl::Status Event::Synchronize() const {
  HRX_RETURN_IF_ERROR(state_->SendRecord());
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::EventRequest request;
  request.set_event(state_->id());
  hrx::v1::SynchronizeEventResponse response;
  return connection.Check(
      connection.events().SynchronizeEvent(context.get(), request, &response));
}

uint64_t Event::id() const { return state_->id(); }
uint64_t Event::brand() const { return state_->connection().brand(); }

}  // namespace hrx
