#include "daemon/server/services.h"

#include <unistd.h>

#include <memory>
#include <optional>
#include <utility>

#include "daemon/server/decode.h"
#include "daemon/server/encode_stats.h"
#include "daemon/server/finish.h"
#include "daemon/server/services_lane.h"
#include "daemon/server/stream_reactor.h"
#include "daemon/stream/wire_shape.h"
#include "shared/grpc_status.h"
#include "shared/refusal.h"
#include "shared/version.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::ToGrpcStatus;

// A completion for Core's asynchronous methods that finishes the call.
DoneCallback FinishLater(Core& core, grpc::ServerUnaryReactor* reactor) {
  return [&core, reactor](absl::Status status) {
    core.refusals().Count(status);
    reactor->Finish(ToGrpcStatus(status));
  };
}

void EncodeDeviceInfo(const DeviceInfo& info, hrx::v1::DeviceInfo* out) {
  out->set_backend(info.backend);
  out->set_name(info.name);
  out->set_target(info.target);
  out->set_memory_bytes(info.memory_bytes);
  out->set_queue_count(info.queue_count);
  out->set_integrated(info.integrated);
}

}  // namespace

grpc::ServerUnaryReactor* SessionsService::OpenSession(
    grpc::CallbackServerContext* context,
    const hrx::v1::OpenSessionRequest* request,
    hrx::v1::OpenSessionResponse* response) {
  // On the gRPC thread, not the caller's lane: opening a session never
  // waits for an executor, and a new client's connect must not queue
  // behind its tenant's calls that do (a busy tenant's lane held a
  // client's connect past its deadline).
  auto identity = Identify(*context, peers_);
  if (!identity.ok()) return Finish(core_, context, identity.status());
  auto session = core_.OpenSession(request->client_name(), *identity);
  if (session.ok()) {
    FromWire(core_.handles().SealSession(*session),
             response->mutable_session());
  }
  return Finish(core_, context, session.status());
}

grpc::ServerUnaryReactor* SessionsService::CloseSession(
    grpc::CallbackServerContext* context,
    const hrx::v1::CloseSessionRequest* request,
    hrx::v1::CloseSessionResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        core_.CloseSession(
            session, [reactor, response](absl::StatusOr<CloseSummary> summary) {
              if (summary.ok()) {
                response->set_freed_buffers(summary->freed_buffers);
                response->set_freed_streams(summary->freed_streams);
              }
              reactor->Finish(ToGrpcStatus(summary.status()));
            });
        return reactor;
      });
}

grpc::ServerUnaryReactor* DevicesService::GetDeviceInfo(
    grpc::CallbackServerContext* context,
    const hrx::v1::GetDeviceInfoRequest* request,
    hrx::v1::DeviceInfo* response) {
  EncodeDeviceInfo(core_.admin().device_info(), response);
  return Finish(core_, context, absl::OkStatus());
}

grpc::ServerUnaryReactor* DevicesService::SetQueueCount(
    grpc::CallbackServerContext* context,
    const hrx::v1::SetQueueCountRequest* request,
    hrx::v1::SetQueueCountResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        return Finish(
            core_, context,
            core_.admin().SetQueueCount(caller->session(), request->count()));
      });
}

grpc::ServerUnaryReactor* KernelsService::LoadKernel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        hrx::v1::LoadKernelRequest request;
        if (absl::Status parsed = ParseChecked(*raw_request, &request);
            !parsed.ok()) {
          return Finish(core_, context, parsed);
        }
        const uint64_t session = caller->session();
        std::optional<backend::KernelSignature> declared;
        if (request.has_declared()) {
          auto decoded = DecodeSignature(request.declared());
          if (!decoded.ok()) return Finish(core_, context, decoded.status());
          declared = *std::move(decoded);
        }
        auto kernel =
            core_.kernels().Load(session, request.code(), request.entry(),
                                 declared ? &*declared : nullptr);
        if (kernel.ok()) {
          hrx::v1::LoadKernelResponse response;
          caller->Seal(kernel->handle, response.mutable_kernel());
          EncodeSignature(kernel->signature, response.mutable_signature());
          SerializeInto(response, raw_response);
        }
        return Finish(core_, context, kernel.status());
      });
}

grpc::ServerUnaryReactor* KernelsService::UnloadKernel(
    grpc::CallbackServerContext* context,
    const hrx::v1::UnloadKernelRequest* request,
    hrx::v1::UnloadKernelResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto kernel = caller->Object(
            request->kernel(), shared::HandleKind::kKernel, "unload kernel");
        if (!kernel.ok()) return Finish(core_, context, kernel.status());
        return Finish(core_, context, core_.kernels().Unload(session, *kernel));
      });
}

grpc::ServerUnaryReactor* EventsService::AnswerOrForward(
    grpc::CallbackServerContext* context, uint64_t session, uint64_t event,
    hrx::executor::v1::EventCall::Op op, absl::StatusOr<bool> answer,
    std::function<void(bool)> fill) {
  if (answer.ok() || executor_rings_ == nullptr ||
      ReasonOf(answer.status()) != Reason::kUnknownEvent) {
    if (answer.ok()) fill(*answer);
    return Finish(core_, context, answer.status());
  }
  grpc::ServerUnaryReactor* reactor = CallReactor(context);
  DoneCallback finish = FinishLater(core_, reactor);
  const bool asked = executor_rings_->CallEvent(
      session, event, op,
      [finish, fill = std::move(fill)](absl::StatusOr<bool> there) {
        if (there.ok()) fill(*there);
        finish(there.status());
      });
  // No executor serves the session: hrxd's answer stands.
  if (!asked) finish(answer.status());
  return reactor;
}

grpc::ServerUnaryReactor* EventsService::QueryEvent(
    grpc::CallbackServerContext* context, const hrx::v1::EventRequest* request,
    hrx::v1::QueryEventResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        return AnswerOrForward(
            context, session, request->event(),
            hrx::executor::v1::EventCall::OP_QUERY,
            core_.events().Query(session, request->event()),
            [response](bool complete) { response->set_complete(complete); });
      });
}

grpc::ServerUnaryReactor* EventsService::SynchronizeEvent(
    grpc::CallbackServerContext* context, const hrx::v1::EventRequest* request,
    hrx::v1::SynchronizeEventResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        DoneCallback finish = FinishLater(core_, reactor);
        const uint64_t event = request->event();
        core_.events().Synchronize(
            session, event,
            [this, session, event, finish](absl::Status status) {
              if (status.ok() || executor_rings_ == nullptr ||
                  ReasonOf(status) != Reason::kUnknownEvent ||
                  !executor_rings_->CallEvent(
                      session, event,
                      hrx::executor::v1::EventCall::OP_SYNCHRONIZE,
                      [finish](absl::StatusOr<bool> there) {
                        finish(there.status());
                      })) {
                finish(status);
              }
            });
        return reactor;
      });
}

grpc::ServerUnaryReactor* EventsService::ReleaseEvent(
    grpc::CallbackServerContext* context, const hrx::v1::EventRequest* request,
    hrx::v1::ReleaseEventResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        absl::Status released =
            core_.events().Release(session, request->event());
        return AnswerOrForward(context, session, request->event(),
                               hrx::executor::v1::EventCall::OP_RELEASE,
                               released.ok() ? absl::StatusOr<bool>(true)
                                             : absl::StatusOr<bool>(released),
                               [](bool) {});
      });
}

grpc::ServerUnaryReactor* BuffersService::Allocate(
    grpc::CallbackServerContext* context,
    const hrx::v1::AllocateRequest* request,
    hrx::v1::AllocateResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        const AllocationKind kind =
            request->placement() == hrx::v1::PLACEMENT_SHARED
                ? AllocationKind::kShared
            : request->contents() == hrx::v1::INITIAL_CONTENTS_ZEROED
                ? AllocationKind::kZeroed
                : AllocationKind::kDevice;
        auto stream = caller->OptionalObject(
            request->has_stream(), request->stream(),
            shared::HandleKind::kStream, "allocate stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        auto buffer =
            core_.buffers().Allocate(session, request->bytes(), kind, *stream);
        if (buffer.ok()) {
          caller->Seal(buffer->handle, response->mutable_buffer());
          response->set_bytes(buffer->bytes);
          response->set_allocation_id(buffer->allocation_id);
        }
        return Finish(core_, context, buffer.status());
      });
}

grpc::ServerUnaryReactor* BuffersService::Free(
    grpc::CallbackServerContext* context, const hrx::v1::FreeRequest* request,
    hrx::v1::FreeResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto buffer = caller->Object(
            request->buffer(), shared::HandleKind::kBuffer, "free buffer");
        if (!buffer.ok()) return Finish(core_, context, buffer.status());
        return Finish(core_, context, core_.buffers().Free(session, *buffer));
      });
}

grpc::ServerUnaryReactor* BuffersService::Grant(
    grpc::CallbackServerContext* context, const hrx::v1::GrantRequest* request,
    hrx::v1::GrantResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto buffer = caller->Object(
            request->buffer(), shared::HandleKind::kBuffer, "grant buffer");
        if (!buffer.ok()) return Finish(core_, context, buffer.status());
        auto grant = core_.sharing().Grant(
            caller->session(), *buffer, request->tenant(), request->session());
        if (grant.ok()) response->set_grant(*grant);
        return Finish(core_, context, grant.status());
      });
}

grpc::ServerUnaryReactor* BuffersService::Import(
    grpc::CallbackServerContext* context, const hrx::v1::ImportRequest* request,
    hrx::v1::ImportResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto buffer =
            core_.sharing().Import(caller->session(), request->grant());
        if (buffer.ok()) {
          caller->Seal(buffer->handle, response->mutable_buffer());
          response->set_bytes(buffer->bytes);
          response->set_allocation_id(buffer->allocation_id);
        }
        return Finish(core_, context, buffer.status());
      });
}

grpc::ServerUnaryReactor* BuffersService::Revoke(
    grpc::CallbackServerContext* context, const hrx::v1::RevokeRequest* request,
    hrx::v1::RevokeResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        return Finish(
            core_, context,
            core_.sharing().Revoke(caller->session(), request->grant()));
      });
}

grpc::ServerUnaryReactor* BuffersService::Export(
    grpc::CallbackServerContext* context, const hrx::v1::ExportRequest* request,
    hrx::v1::ExportResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto buffer = caller->Object(
            request->buffer(), shared::HandleKind::kBuffer, "export buffer");
        if (!buffer.ok()) return Finish(core_, context, buffer.status());
        if (request->kind() != hrx::v1::HANDLE_KIND_SHM &&
            request->kind() != hrx::v1::HANDLE_KIND_DMABUF) {
          return Finish(
              core_, context,
              Refusal(Reason::kBadHandleKind,
                      "export buffer: ask for "
                      "HANDLE_KIND_SHM or HANDLE_KIND_DMABUF. Fix: set kind."));
        }
        auto ticket =
            core_.sharing().Export(caller->session(), *buffer,
                                   request->kind() == hrx::v1::HANDLE_KIND_SHM
                                       ? backend::ExportKind::kShm
                                       : backend::ExportKind::kDmaBuf);
        if (ticket.ok()) {
          response->set_ticket(ticket->ticket);
          response->set_fd_socket(fd_socket_);
          response->set_bytes(ticket->bytes);
          response->set_offset(ticket->offset);
          response->set_export_id(ticket->export_id);
        }
        return Finish(core_, context, ticket.status());
      });
}

grpc::ServerUnaryReactor* BuffersService::ReleaseExport(
    grpc::CallbackServerContext* context,
    const hrx::v1::ReleaseExportRequest* request,
    hrx::v1::ReleaseExportResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        return Finish(core_, context,
                      core_.sharing().ReleaseExport(caller->session(),
                                                    request->export_id()));
      });
}

grpc::ServerUnaryReactor* StreamsService::CreateStream(
    grpc::CallbackServerContext* context,
    const hrx::v1::CreateStreamRequest* request,
    hrx::v1::CreateStreamResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream = core_.commands().CreateStream(session);
        if (stream.ok()) {
          caller->Seal(stream->handle, response->mutable_stream());
          response->set_queue(stream->queue);
        }
        return Finish(core_, context, stream.status());
      });
}

grpc::ServerUnaryReactor* StreamsService::ForwardToExecutor(
    grpc::CallbackServerContext* context, uint64_t session, uint64_t stream,
    hrx::executor::v1::EventCall::Op op, Forwarded then) {
  if (executor_rings_ == nullptr ||
      !executor_rings_->ServesStream(session, stream)) {
    return nullptr;
  }
  grpc::ServerUnaryReactor* reactor = CallReactor(context);
  DoneCallback finish = FinishLater(core_, reactor);
  const bool asked = executor_rings_->CallStream(
      session, stream, op,
      [then = std::move(then),
       finish](absl::StatusOr<hrx::executor::v1::EventAnswer> answer) {
        then(std::move(answer), finish);
      });
  if (!asked) {
    // Its ring ended meanwhile, and hrxd's side of the stream goes with it.
    absl::Status gone = core_.commands().StreamQueue(session, stream).status();
    finish(!gone.ok() ? gone
                      : Refusal(Reason::kStaleHandle,
                                "stream: its ring ended as the call came. "
                                "Fix: open a new stream."));
  }
  return reactor;
}

absl::Status StreamsService::NotOnAnExecutorsRing(uint64_t session,
                                                  uint64_t stream,
                                                  std::string_view what) const {
  if (executor_rings_ == nullptr ||
      !executor_rings_->ServesStream(session, stream)) {
    return absl::OkStatus();
  }
  return Refusal(
      Reason::kNotServedByExecutor,
      absl::StrFormat("%s: the stream's ring is served by its executor, so "
                      "commands and reads for it go on that ring (a unary "
                      "call would run out of order with it). Fix: send them "
                      "on the ring, or use a stream opened with "
                      "Streams.Open or CreateStream.",
                      what));
}

grpc::ServerUnaryReactor* StreamsService::DestroyStream(
    grpc::CallbackServerContext* context,
    const hrx::v1::DestroyStreamRequest* request,
    hrx::v1::DestroyStreamResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream = caller->Object(
            request->stream(), shared::HandleKind::kStream, "destroy stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        // Destroyed where its ring is served, then hrxd's side of it.
        if (auto* forwarded = ForwardToExecutor(
                context, session, *stream,
                hrx::executor::v1::EventCall::OP_STREAM_DESTROY,
                [this, session, stream = *stream](
                    absl::StatusOr<hrx::executor::v1::EventAnswer> answer,
                    DoneCallback finish) {
                  if (!answer.ok()) return finish(answer.status());
                  // The ring's end may have taken hrxd's side already.
                  core_.commands().DestroyStream(
                      session, stream, [finish](absl::Status status) {
                        finish(status.code() == absl::StatusCode::kNotFound
                                   ? absl::OkStatus()
                                   : status);
                      });
                })) {
          return forwarded;
        }
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        core_.commands().DestroyStream(session, *stream,
                                       FinishLater(core_, reactor));
        return reactor;
      });
}

grpc::ServerUnaryReactor* StreamsService::Submit(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        hrx::v1::SubmitRequest request;
        if (absl::Status parsed = ParseChecked(*raw_request, &request);
            !parsed.ok()) {
          return Finish(core_, context, parsed);
        }
        const uint64_t session = caller->session();
        auto stream = caller->Object(
            request.stream(), shared::HandleKind::kStream, "submit stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        if (absl::Status served =
                NotOnAnExecutorsRing(session, *stream, "submit stream");
            !served.ok()) {
          return Finish(core_, context, served);
        }
        auto commands = caller->Commands(request.commands());
        if (!commands.ok()) return Finish(core_, context, commands.status());
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        core_.commands().Submit(
            session, *stream, *std::move(commands), SubmitErrors::kReturn,
            [this, reactor, raw_response](absl::StatusOr<size_t> enqueued) {
              if (enqueued.ok()) {
                hrx::v1::SubmitResponse response;
                response.set_enqueued(*enqueued);
                SerializeInto(response, raw_response);
              }
              core_.refusals().Count(enqueued.status());
              reactor->Finish(ToGrpcStatus(enqueued.status()));
            });
        return reactor;
      });
}

grpc::ServerUnaryReactor* StreamsService::Synchronize(
    grpc::CallbackServerContext* context,
    const hrx::v1::SynchronizeRequest* request,
    hrx::v1::SynchronizeResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream =
            caller->Object(request->stream(), shared::HandleKind::kStream,
                           "synchronize stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        if (auto* forwarded = ForwardToExecutor(
                context, session, *stream,
                hrx::executor::v1::EventCall::OP_STREAM_SYNCHRONIZE,
                [](absl::StatusOr<hrx::executor::v1::EventAnswer> answer,
                   DoneCallback finish) { finish(answer.status()); })) {
          return forwarded;
        }
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        core_.commands().Synchronize(session, *stream,
                                     FinishLater(core_, reactor));
        return reactor;
      });
}

grpc::ServerUnaryReactor* StreamsService::Read(
    grpc::CallbackServerContext* context, const hrx::v1::ReadRequest* request,
    hrx::v1::ReadResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream = caller->Object(
            request->stream(), shared::HandleKind::kStream, "read stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        if (absl::Status served =
                NotOnAnExecutorsRing(session, *stream, "read stream");
            !served.ok()) {
          return Finish(core_, context, served);
        }
        auto src = caller->View(request->src(), "read src");
        if (!src.ok()) return Finish(core_, context, src.status());
        // The tenant's reply_bytes ceiling holds until the call is done (the
        // client has taken the reply, or the call ended).
        auto hold = core_.commands().ReserveReplyBytes(session, src->length);
        if (!hold.ok()) return Finish(core_, context, hold.status());
        KeepUntilDone(context, std::make_shared<ChargeRef>(*std::move(hold)));
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        // The response outlives the read: gRPC keeps it until Finish.
        core_.commands().Read(session, *stream, *src, response->mutable_data(),
                              FinishLater(core_, reactor));
        return reactor;
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
StreamsService::Open(grpc::CallbackServerContext* context) {
  return new StreamReactor(core_, DecodeCaller(*context, core_, peers_),
                           LaneOf(core_, *context, peers_));
}

grpc::ServerUnaryReactor* StreamsService::OpenRing(
    grpc::CallbackServerContext* context, const hrx::v1::OpenRingRequest*,
    hrx::v1::OpenRingResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto peer = Identify(*context, peers_);
        if (!peer.ok()) return Finish(core_, context, peer.status());
        auto opened = rings_.Open(*caller, *peer);
        if (opened.ok()) {
          caller->Seal(opened->stream, response->mutable_stream());
          response->set_queue(opened->queue);
          response->set_ticket(opened->ticket);
          response->set_fd_socket(fd_socket_);
          response->set_region_bytes(opened->region_bytes);
        }
        return Finish(core_, context, opened.status());
      });
}

grpc::ServerUnaryReactor* StreamsService::Poll(
    grpc::CallbackServerContext* context, const hrx::v1::PollRequest* request,
    hrx::v1::PollResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream = caller->Object(
            request->stream(), shared::HandleKind::kStream, "poll stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        if (auto* forwarded = ForwardToExecutor(
                context, session, *stream,
                hrx::executor::v1::EventCall::OP_STREAM_POLL,
                [response](
                    absl::StatusOr<hrx::executor::v1::EventAnswer> answer,
                    DoneCallback finish) {
                  if (answer.ok()) response->set_complete(answer->complete());
                  finish(answer.status());
                })) {
          return forwarded;
        }
        auto complete = core_.commands().Poll(session, *stream);
        if (complete.ok()) response->set_complete(*complete);
        return Finish(core_, context, complete.status());
      });
}

grpc::ServerUnaryReactor* StreamsService::GetStreamStats(
    grpc::CallbackServerContext* context,
    const hrx::v1::StreamStatsRequest* request,
    hrx::v1::StreamStatsResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        const uint64_t session = caller->session();
        auto stream = caller->Object(
            request->stream(), shared::HandleKind::kStream, "stream stats");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        if (auto* forwarded = ForwardToExecutor(
                context, session, *stream,
                hrx::executor::v1::EventCall::OP_STREAM_STATS,
                [response](
                    absl::StatusOr<hrx::executor::v1::EventAnswer> answer,
                    DoneCallback finish) {
                  if (answer.ok()) *response = answer->stats();
                  finish(answer.status());
                })) {
          return forwarded;
        }
        auto stats = core_.commands().GetStreamStats(session, *stream);
        if (stats.ok()) EncodeStreamStats(*stats, response);
        return Finish(core_, context, stats.status());
      });
}

grpc::ServerUnaryReactor* DaemonStatusService::GetStatus(
    grpc::CallbackServerContext* context,
    const hrx::v1::GetStatusRequest* request,
    hrx::v1::GetStatusResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto identity = Identify(*context, peers_);
        if (!identity.ok()) return Finish(core_, context, identity.status());
        if (absl::Status known = core_.admin().RequireKnownCaller(*identity);
            !known.ok()) {
          return Finish(core_, context, known);
        }
        const CoreStatus status = core_.admin().status();
        EncodeDeviceInfo(status.device, response->mutable_device());
        response->set_version(shared::kVersion);
        response->set_pid(static_cast<uint32_t>(getpid()));
        response->set_uptime_seconds(status.uptime_seconds);
        response->set_sessions(status.sessions);
        response->set_streams(status.streams);
        response->set_buffers(status.buffers);
        response->set_bytes_in_use(status.bytes_in_use);
        response->set_commands_submitted(status.commands_submitted);
        response->set_kernels(status.kernels);
        response->set_events(status.events);
        response->set_queues_created(status.queues_created);
        for (backend::ExportKind kind : core_.admin().export_kinds()) {
          response->add_handle_kinds(
              kind == backend::ExportKind::kShm ? "shm" : "dmabuf");
        }
        EncodeCounters(status.dispatch_cache,
                       response->mutable_dispatch_cache());
        EncodeCounters(status.transfer_cache,
                       response->mutable_transfer_cache());
        EncodeCounters(status.allocation_pool,
                       response->mutable_allocation_pool());
        EncodeCounters(status.staging_pool, response->mutable_staging_pool());
        EncodeCounters(status.upload_staging,
                       response->mutable_upload_staging());
        response->set_suspended_streams(status.suspended_streams);
        response->set_parked_operations(status.parked_operations);
        response->set_executor_commands(status.executor_commands);
        return Finish(core_, context, absl::OkStatus());
      });
}

}  // namespace hrx::daemon

namespace hrx::daemon {

grpc::ServerUnaryReactor* GraphsService::CreateExec(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        hrx::v1::CreateGraphExecRequest request;
        if (absl::Status parsed = ParseChecked(*raw_request, &request);
            !parsed.ok()) {
          return Finish(core_, context, parsed);
        }
        auto stream =
            caller->Object(request.stream(), shared::HandleKind::kStream,
                           "finish graph stream");
        if (!stream.ok()) return Finish(core_, context, stream.status());
        auto spec = caller->Graph(request);
        if (!spec.ok()) return Finish(core_, context, spec.status());
        auto exec = core_.graphs().CreateExec(caller->session(), *stream,
                                              *std::move(spec));
        if (exec.ok()) {
          hrx::v1::CreateGraphExecResponse response;
          caller->Seal(exec->handle, response.mutable_exec());
          response.set_binding_bytes(exec->binding_bytes);
          SerializeInto(response, raw_response);
        }
        return Finish(core_, context, exec.status());
      });
}

grpc::ServerUnaryReactor* GraphsService::DestroyExec(
    grpc::CallbackServerContext* context,
    const hrx::v1::GraphExecRequest* request,
    hrx::v1::GraphExecResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto exec =
            caller->Object(request->exec(), shared::HandleKind::kGraphExec,
                           "destroy graph exec");
        if (!exec.ok()) return Finish(core_, context, exec.status());
        return Finish(core_, context,
                      core_.graphs().DestroyExec(caller->session(), *exec));
      });
}

grpc::ServerUnaryReactor* GraphsService::ClearFailure(
    grpc::CallbackServerContext* context,
    const hrx::v1::GraphExecRequest* request,
    hrx::v1::GraphExecResponse* response) {
  return OnCallLane(
      core_, peers_, context, [=, this]() -> grpc::ServerUnaryReactor* {
        auto caller = DecodeCaller(*context, core_, peers_);
        if (!caller.ok()) return Finish(core_, context, caller.status());
        auto exec =
            caller->Object(request->exec(), shared::HandleKind::kGraphExec,
                           "clear graph failure");
        if (!exec.ok()) return Finish(core_, context, exec.status());
        return Finish(core_, context,
                      core_.graphs().ClearFailure(caller->session(), *exec));
      });
}

absl::Status AdminService::Authorize(const grpc::CallbackServerContext& context,
                                     Role role) {
  auto identity = Identify(context, peers_);
  if (!identity.ok()) return identity.status();
  return core_.admin().RequireRole(*identity, role);
}

grpc::ServerUnaryReactor* AdminService::ListTenants(
    grpc::CallbackServerContext* context,
    const hrx::v1::ListTenantsRequest* request,
    hrx::v1::ListTenantsResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kObserver);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        for (const TenantUsage& tenant : core_.admin().ListTenants()) {
          hrx::v1::TenantInfo* info = response->add_tenants();
          info->set_name(tenant.name);
          info->set_role(EncodeRole(tenant.role));
          *info->mutable_budget() = BudgetFromLimits(tenant.limits);
          EncodeUsage(tenant.usage, info->mutable_usage());
          info->set_sessions(tenant.sessions);
          info->set_load_kernels(tenant.load_kernels);
          info->set_detached_exports(tenant.detached_exports);
          info->set_detached_export_bytes(tenant.detached_export_bytes);
        }
        return Finish(core_, context, absl::OkStatus());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::ListExecutors(
    grpc::CallbackServerContext* context,
    const hrx::v1::ListExecutorsRequest* request,
    hrx::v1::ListExecutorsResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kObserver);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        for (const ExecutorInfo& executor : core_.admin().executors()) {
          hrx::v1::ExecutorInfo* info = response->add_executors();
          info->set_name(executor.name);
          info->set_pid(static_cast<uint32_t>(executor.pid));
          info->set_running(executor.running);
          info->set_restarts(executor.restarts);
          info->set_bytes_in_use(executor.bytes_in_use);
          for (const std::string& tenant : executor.tenants)
            info->add_tenants(tenant);
          info->set_last_loss(executor.last_loss);
        }
        return Finish(core_, context, absl::OkStatus());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::ListSessions(
    grpc::CallbackServerContext* context,
    const hrx::v1::ListSessionsRequest* request,
    hrx::v1::ListSessionsResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kObserver);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        for (const SessionSummary& session :
             core_.admin().ListSessions(request->tenant())) {
          hrx::v1::SessionInfo* info = response->add_sessions();
          info->set_id(session.id);
          info->set_tenant(session.tenant);
          info->set_client_name(session.client_name);
          info->set_uid(session.uid);
          info->set_pid(session.pid);
          info->set_buffers(session.buffers);
          info->set_streams(session.streams);
          info->set_kernels(session.kernels);
          info->set_buffer_bytes(session.buffer_bytes);
        }
        return Finish(core_, context, absl::OkStatus());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::ListBuffers(
    grpc::CallbackServerContext* context,
    const hrx::v1::ListBuffersRequest* request,
    hrx::v1::ListBuffersResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kObserver);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        for (const BufferSummary& buffer :
             core_.admin().ListBuffers(request->tenant(), request->session())) {
          hrx::v1::BufferInfo* info = response->add_buffers();
          info->set_session(buffer.session);
          info->set_tenant(buffer.tenant);
          info->set_handle(buffer.handle);
          info->set_bytes(buffer.bytes);
          info->set_allocation_id(buffer.allocation_id);
          info->set_shared(buffer.shared);
        }
        return Finish(core_, context, absl::OkStatus());
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::SetBudget(
    grpc::CallbackServerContext* context,
    const hrx::v1::SetBudgetRequest* request,
    hrx::v1::SetBudgetResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kAdmin);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        return Finish(
            core_, context,
            core_.admin().SetBudget(request->tenant(),
                                    LimitsFromBudget(request->budget())));
      },
      LaneKind::kAdmin);
}

grpc::ServerUnaryReactor* AdminService::EvictSession(
    grpc::CallbackServerContext* context,
    const hrx::v1::EvictSessionRequest* request,
    hrx::v1::EvictSessionResponse* response) {
  return OnCallLane(
      core_, peers_, context,
      [=, this]() -> grpc::ServerUnaryReactor* {
        if (absl::Status allowed = Authorize(*context, Role::kAdmin);
            !allowed.ok()) {
          return Finish(core_, context, allowed);
        }
        grpc::ServerUnaryReactor* reactor = CallReactor(context);
        core_.CloseSession(
            request->id(),
            [reactor, response](absl::StatusOr<CloseSummary> summary) {
              if (summary.ok()) {
                response->set_freed_buffers(summary->freed_buffers);
                response->set_freed_streams(summary->freed_streams);
              }
              reactor->Finish(ToGrpcStatus(summary.status()));
            },
            Core::CloseCause::kEviction);
        return reactor;
      },
      LaneKind::kAdmin);
}

}  // namespace hrx::daemon
