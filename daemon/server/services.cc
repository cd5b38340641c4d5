#include "daemon/server/services.h"

#include <unistd.h>

#include <utility>

#include "daemon/server/decode.h"
#include "shared/grpc_status.h"
#include "shared/version.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::ToGrpcStatus;

// Finishes `reactor` with `status`; returns the reactor for the handler.
grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A completion for Core's asynchronous methods that finishes the call.
DoneCallback FinishLater(grpc::ServerUnaryReactor* reactor) {
  return [reactor](absl::Status status) {
    reactor->Finish(ToGrpcStatus(status));
  };
}

void EncodeDeviceInfo(const DeviceInfo& info, hrx::v1::DeviceInfo* out) {
  out->set_backend(info.backend);
  out->set_name(info.name);
  out->set_target(info.target);
  out->set_memory_bytes(info.memory_bytes);
  out->set_queue_count(info.queue_count);
}

}  // namespace

grpc::ServerUnaryReactor* SessionsService::OpenSession(
    grpc::CallbackServerContext* context,
    const hrx::v1::OpenSessionRequest* request,
    hrx::v1::OpenSessionResponse* response) {
  auto session = core_.OpenSession(request->client_name());
  if (session.ok()) response->set_session(*session);
  return Finish(context, session.status());
}

grpc::ServerUnaryReactor* SessionsService::CloseSession(
    grpc::CallbackServerContext* context,
    const hrx::v1::CloseSessionRequest* request,
    hrx::v1::CloseSessionResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core_.CloseSession(*session, [reactor, response](
                                   absl::StatusOr<CloseSummary> summary) {
    if (summary.ok()) {
      response->set_freed_buffers(summary->freed_buffers);
      response->set_freed_streams(summary->freed_streams);
    }
    reactor->Finish(ToGrpcStatus(summary.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* DevicesService::GetDeviceInfo(
    grpc::CallbackServerContext* context,
    const hrx::v1::GetDeviceInfoRequest* request,
    hrx::v1::DeviceInfo* response) {
  EncodeDeviceInfo(core_.device_info(), response);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BuffersService::Allocate(
    grpc::CallbackServerContext* context,
    const hrx::v1::AllocateRequest* request,
    hrx::v1::AllocateResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  const AllocationKind kind =
      request->contents() == hrx::v1::INITIAL_CONTENTS_ZEROED
          ? AllocationKind::kZeroed
          : AllocationKind::kDevice;
  auto buffer = core_.Allocate(*session, request->bytes(), kind);
  if (buffer.ok()) {
    response->set_buffer(buffer->handle);
    response->set_bytes(buffer->bytes);
  }
  return Finish(context, buffer.status());
}

grpc::ServerUnaryReactor* BuffersService::Free(
    grpc::CallbackServerContext* context, const hrx::v1::FreeRequest* request,
    hrx::v1::FreeResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  return Finish(context, core_.Free(*session, request->buffer()));
}

grpc::ServerUnaryReactor* StreamsService::CreateStream(
    grpc::CallbackServerContext* context,
    const hrx::v1::CreateStreamRequest* request,
    hrx::v1::CreateStreamResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  auto stream = core_.CreateStream(*session);
  if (stream.ok()) {
    response->set_stream(stream->handle);
    response->set_queue(stream->queue);
  }
  return Finish(context, stream.status());
}

grpc::ServerUnaryReactor* StreamsService::DestroyStream(
    grpc::CallbackServerContext* context,
    const hrx::v1::DestroyStreamRequest* request,
    hrx::v1::DestroyStreamResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core_.DestroyStream(*session, request->stream(), FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* StreamsService::Submit(
    grpc::CallbackServerContext* context, const hrx::v1::SubmitRequest* request,
    hrx::v1::SubmitResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  auto commands = DecodeSubmit(*request);
  if (!commands.ok()) return Finish(context, commands.status());
  auto enqueued =
      core_.Submit(*session, request->stream(), *std::move(commands));
  if (enqueued.ok()) response->set_enqueued(*enqueued);
  return Finish(context, enqueued.status());
}

grpc::ServerUnaryReactor* StreamsService::Synchronize(
    grpc::CallbackServerContext* context,
    const hrx::v1::SynchronizeRequest* request,
    hrx::v1::SynchronizeResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core_.Synchronize(*session, request->stream(), FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* StreamsService::Read(
    grpc::CallbackServerContext* context, const hrx::v1::ReadRequest* request,
    hrx::v1::ReadResponse* response) {
  auto session = DecodeSession(*context);
  if (!session.ok()) return Finish(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The response outlives the read: gRPC keeps it until Finish.
  core_.Read(*session, request->stream(), DecodeView(request->src()),
             response->mutable_data(), FinishLater(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* DaemonStatusService::GetStatus(
    grpc::CallbackServerContext* context,
    const hrx::v1::GetStatusRequest* request,
    hrx::v1::GetStatusResponse* response) {
  const CoreStatus status = core_.status();
  EncodeDeviceInfo(status.device, response->mutable_device());
  response->set_version(shared::kVersion);
  response->set_pid(static_cast<uint32_t>(getpid()));
  response->set_uptime_seconds(status.uptime_seconds);
  response->set_sessions(status.sessions);
  response->set_streams(status.streams);
  response->set_buffers(status.buffers);
  response->set_bytes_in_use(status.bytes_in_use);
  response->set_commands_submitted(status.commands_submitted);
  return Finish(context, absl::OkStatus());
}

}  // namespace hrx::daemon
