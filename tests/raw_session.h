// Test helper: a session driven through the generated stubs directly,
// bypassing libhrx's client-side checks, to prove the daemon's own checks.
#ifndef HRX_TESTS_RAW_SESSION_H_
#define HRX_TESTS_RAW_SESSION_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/internal/connection.h"
#include "gtest/gtest.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "hrx/v1/device.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "hrx/v1/stream.grpc.pb.h"
#include "shared/grpc_status.h"
#include "shared/socket_path.h"

namespace hrx::testing {

struct RawSession {
  explicit RawSession(const std::string& socket_path)
      : channel(client::internal::MakeChannel(socket_path)),
        sessions(hrx::v1::Sessions::NewStub(channel)),
        buffers(hrx::v1::Buffers::NewStub(channel)),
        streams(hrx::v1::Streams::NewStub(channel)) {
    grpc::ClientContext context;
    hrx::v1::OpenSessionRequest request;
    hrx::v1::OpenSessionResponse response;
    open_status = shared::FromGrpcStatus(
        sessions->OpenSession(&context, request, &response));
    session = response.session();
  }

  std::unique_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata(
        shared::kSessionMetadataKey,
        shared::FormatWireHandle(client::internal::FromProto(session)));
    return context;
  }

  absl::StatusOr<hrx::v1::Handle> Allocate(
      uint64_t bytes,
      hrx::v1::Placement placement = hrx::v1::PLACEMENT_DEVICE) {
    auto context = Context();
    hrx::v1::AllocateRequest request;
    request.set_bytes(bytes);
    request.set_contents(hrx::v1::INITIAL_CONTENTS_ZEROED);
    request.set_placement(placement);
    hrx::v1::AllocateResponse response;
    absl::Status status = shared::FromGrpcStatus(
        buffers->Allocate(context.get(), request, &response));
    if (!status.ok()) return status;
    return response.buffer();
  }

  absl::StatusOr<hrx::v1::Handle> CreateStream() {
    auto context = Context();
    hrx::v1::CreateStreamRequest request;
    hrx::v1::CreateStreamResponse response;
    absl::Status status = shared::FromGrpcStatus(
        streams->CreateStream(context.get(), request, &response));
    if (!status.ok()) return status;
    return response.stream();
  }

  absl::Status Submit(const hrx::v1::SubmitRequest& request) {
    auto context = Context();
    hrx::v1::SubmitResponse response;
    return shared::FromGrpcStatus(
        streams->Submit(context.get(), request, &response));
  }

  absl::StatusOr<std::string> Read(const hrx::v1::Handle& stream,
                                   const hrx::v1::Handle& buffer,
                                   uint64_t offset, uint64_t length) {
    auto context = Context();
    hrx::v1::ReadRequest request;
    *request.mutable_stream() = stream;
    *request.mutable_src()->mutable_buffer() = buffer;
    request.mutable_src()->set_offset(offset);
    request.mutable_src()->set_length(length);
    hrx::v1::ReadResponse response;
    absl::Status status = shared::FromGrpcStatus(
        streams->Read(context.get(), request, &response));
    if (!status.ok()) return status;
    return response.data();
  }

  absl::Status Synchronize(const hrx::v1::Handle& stream) {
    auto context = Context();
    hrx::v1::SynchronizeRequest request;
    *request.mutable_stream() = stream;
    hrx::v1::SynchronizeResponse response;
    return shared::FromGrpcStatus(
        streams->Synchronize(context.get(), request, &response));
  }

  // Whether everything submitted to `stream` has completed, without waiting.
  absl::StatusOr<bool> Poll(const hrx::v1::Handle& stream) {
    auto context = Context();
    hrx::v1::PollRequest request;
    *request.mutable_stream() = stream;
    hrx::v1::PollResponse response;
    absl::Status status = shared::FromGrpcStatus(
        streams->Poll(context.get(), request, &response));
    if (!status.ok()) return status;
    return response.complete();
  }

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hrx::v1::Sessions::Stub> sessions;
  std::unique_ptr<hrx::v1::Buffers::Stub> buffers;
  std::unique_ptr<hrx::v1::Streams::Stub> streams;
  absl::Status open_status;
  hrx::v1::Handle session;
};

// A one-command fill request.
inline hrx::v1::SubmitRequest FillRequest(const hrx::v1::Handle& stream,
                                          const hrx::v1::Handle& buffer,
                                          uint64_t offset, uint64_t length,
                                          uint32_t value) {
  hrx::v1::SubmitRequest request;
  *request.mutable_stream() = stream;
  hrx::v1::Fill* fill = request.add_commands()->mutable_fill();
  *fill->mutable_dst()->mutable_buffer() = buffer;
  fill->mutable_dst()->set_offset(offset);
  fill->mutable_dst()->set_length(length);
  fill->set_value(value);
  return request;
}

// Whether the daemon at `socket_path` says its device is integrated
// (DeviceInfo.integrated: every buffer maps, and crosses executors as a
// shared buffer does).
inline bool DeviceIsIntegrated(const std::string& socket_path) {
  auto devices =
      hrx::v1::Devices::NewStub(client::internal::MakeChannel(socket_path));
  grpc::ClientContext context;
  hrx::v1::DeviceInfo info;
  const grpc::Status status =
      devices->GetDeviceInfo(&context, hrx::v1::GetDeviceInfoRequest(), &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return info.integrated();
}

}  // namespace hrx::testing

#endif  // HRX_TESTS_RAW_SESSION_H_
