#include "hrx/client.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "client/internal/stream_state.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"
#include "shared/status_macros.h"

namespace hrx {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& socket_path, const std::string& client_name) {
  ConnectOptions options;
  options.socket_path = socket_path;
  options.client_name = client_name;
  return Connect(options);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const ConnectOptions& options) {
  if (options.default_timeout <= absl::ZeroDuration()) {
    return Refusal(
        Reason::kBadTimeout,
        absl::StrFormat("default_timeout %s is not positive. Fix: pass a "
                        "positive duration, "
                        "or absl::InfiniteDuration() to wait without bound.",
                        absl::FormatDuration(options.default_timeout)));
  }
  Transport transport = options.transport;
  if (const char* chosen = std::getenv("HRX_TRANSPORT");
      transport == Transport::kAuto && chosen != nullptr && chosen[0] != '\0') {
    const std::string name = chosen;
    if (name == "ring") {
      transport = Transport::kRing;
    } else if (name == "grpc") {
      transport = Transport::kGrpc;
    } else if (name != "auto") {
      return Refusal(Reason::kBadTransport,
                     absl::StrFormat("HRX_TRANSPORT is \"%s\". Fix: set it to "
                                     "ring, grpc or auto, or unset it.",
                                     name));
    }
  }
  HRX_ASSIGN_OR_RETURN(
      std::shared_ptr<client::internal::Connection> connection,
      client::internal::Connection::Open(
          shared::ResolveClientSocketPath(options.socket_path),
          options.client_name, options.default_timeout, transport));
  return std::unique_ptr<Client>(new Client(std::move(connection)));
}

absl::Duration Client::default_timeout() const {
  return connection_->default_timeout();
}

absl::StatusOr<Device> Client::OpenDevice(int index) const {
  if (index != 0) {
    return Refusal(
        Reason::kNoSuchDevice,
        absl::StrFormat("device index %d: this daemon owns one device, index "
                        "0. Fix: open device 0.",
                        index));
  }
  auto context = connection_->Context();
  hrx::v1::GetDeviceInfoRequest request;
  hrx::v1::DeviceInfo response;
  HRX_RETURN_IF_ERROR(connection_->Check(
      connection_->devices().GetDeviceInfo(context.get(), request, &response)));
  return Device(
      connection_,
      DeviceInfo{response.backend(), response.name(), response.target(),
                 response.memory_bytes(), response.queue_count()});
}

absl::StatusOr<Device> Client::OpenDeviceFor(int index,
                                             const std::string& target) const {
  HRX_ASSIGN_OR_RETURN(Device device, OpenDevice(index));
  if (device.target() != target) {
    return Refusal(Reason::kTargetMismatch,
                   absl::StrFormat(
                       "workload requires %s, found %s. Fix: build the "
                       "workload for %s or run it where a %s device is served.",
                       target, device.target(), device.target(), target));
  }
  return device;
}

const Handle& Client::session() const { return connection_->session(); }

const std::string& Client::socket_path() const {
  return connection_->socket_path();
}

absl::StatusOr<Stream> Device::CreateStream() const {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<client::internal::StreamState> state,
                       client::internal::StreamState::Open(connection_));
  return Stream(std::move(state));
}

absl::Status Device::SetStreamQueueCount(uint32_t count) const {
  auto context = connection_->Context();
  hrx::v1::SetQueueCountRequest request;
  request.set_count(count);
  hrx::v1::SetQueueCountResponse response;
  return connection_->Check(
      connection_->devices().SetQueueCount(context.get(), request, &response));
}

absl::StatusOr<uint32_t> Device::StreamQueueCount() const {
  auto context = connection_->Context();
  hrx::v1::GetDeviceInfoRequest request;
  hrx::v1::DeviceInfo response;
  HRX_RETURN_IF_ERROR(connection_->Check(
      connection_->devices().GetDeviceInfo(context.get(), request, &response)));
  return response.queue_count();
}

}  // namespace hrx
