#include "hrx/stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/stream_state.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx {
namespace {

void SetView(const View& view, hrx::v1::View* out) {
  out->set_buffer(view.buffer_handle());
  out->set_offset(view.offset());
  out->set_length(view.length());
}

}  // namespace

Stream::Stream(std::shared_ptr<client::internal::StreamState> state)
    : state_(std::move(state)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

uint64_t Stream::handle() const { return state_->handle(); }
uint32_t Stream::queue() const { return state_->queue(); }

absl::Status Stream::CheckOwned(const View& view, const char* what) const {
  if (view.brand() != state_->connection().brand()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "foreign_view: %s: the view's buffer belongs to another client "
        "session than this stream's. Fix: use buffers allocated through a "
        "stream of the same hrx::Client.",
        what));
  }
  return absl::OkStatus();
}

absl::StatusOr<Buffer> Stream::Allocate(uint64_t bytes) {
  return AllocateWith(bytes, /*zeroed=*/false);
}

absl::StatusOr<Buffer> Stream::AllocateZeroed(uint64_t bytes) {
  return AllocateWith(bytes, /*zeroed=*/true);
}

absl::StatusOr<Buffer> Stream::AllocateWith(uint64_t bytes, bool zeroed) {
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::AllocateRequest request;
  request.set_bytes(bytes);
  if (zeroed) request.set_contents(hrx::v1::INITIAL_CONTENTS_ZEROED);
  hrx::v1::AllocateResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.buffers().Allocate(context.get(), request, &response)));
  return Buffer(state_->shared_connection(), response.buffer(),
                response.bytes());
}

absl::Status Stream::Fill(const View& dst, uint8_t value) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "fill dst"));
  hrx::v1::Command command;
  SetView(dst, command.mutable_fill()->mutable_dst());
  command.mutable_fill()->set_value(value);
  return state_->Append(std::move(command), 0);
}

absl::Status Stream::Copy(const View& dst, const View& src) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "copy dst"));
  HRX_RETURN_IF_ERROR(CheckOwned(src, "copy src"));
  if (dst.length() != src.length()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy_length_mismatch: copy: dst is %u bytes but src is %u bytes. "
        "Fix: copy between views of equal length.",
        dst.length(), src.length()));
  }
  if (dst.buffer_handle() == src.buffer_handle() &&
      shared::SpansOverlap(dst.offset(), src.offset(), dst.length())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy_overlap: copy: dst [%u, +%u) overlaps src [%u, +%u) in the same "
        "buffer. Fix: copy through a temporary buffer.",
        dst.offset(), dst.length(), src.offset(), src.length()));
  }
  hrx::v1::Command command;
  SetView(dst, command.mutable_copy()->mutable_dst());
  SetView(src, command.mutable_copy()->mutable_src());
  return state_->Append(std::move(command), 0);
}

absl::Status Stream::Upload(const View& dst, std::span<const uint8_t> bytes) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "upload dst"));
  if (bytes.size() > dst.length()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "upload_too_large: upload: %u bytes of data do not fit the %u-byte "
        "view. Fix: upload at most the view's length.",
        bytes.size(), dst.length()));
  }
  for (uint64_t done = 0; done < bytes.size(); done += kUploadChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kUploadChunkBytes,
                                              bytes.size() - done);
    HRX_ASSIGN_OR_RETURN(View part, dst.Slice(done, chunk));
    hrx::v1::Command command;
    SetView(part, command.mutable_upload()->mutable_dst());
    command.mutable_upload()->set_data(bytes.data() + done, chunk);
    HRX_RETURN_IF_ERROR(state_->Append(std::move(command), chunk));
  }
  return absl::OkStatus();
}

absl::Status Stream::UploadBlocking(const View& dst,
                                    std::span<const uint8_t> bytes) {
  HRX_RETURN_IF_ERROR(Upload(dst, bytes));
  return Synchronize();
}

absl::StatusOr<Readback> Stream::Read(const View& src) {
  HRX_RETURN_IF_ERROR(CheckOwned(src, "read src"));
  HRX_ASSIGN_OR_RETURN(Buffer staging, Allocate(src.length()));
  if (!src.empty()) {
    HRX_ASSIGN_OR_RETURN(View whole, staging.Slice(0, src.length()));
    HRX_RETURN_IF_ERROR(Copy(whole, src));
  }
  return Readback(std::move(staging), src.length(), state_.get());
}

absl::Status Stream::ReadBlocking(const View& src, std::span<uint8_t> out) {
  HRX_RETURN_IF_ERROR(CheckOwned(src, "read src"));
  if (out.size() != src.length()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "read_size_mismatch: read: the view is %u bytes but the destination "
        "holds %u. Fix: pass a destination of exactly the view's length.",
        src.length(), out.size()));
  }
  HRX_RETURN_IF_ERROR(state_->FlushForCaller());
  client::internal::Connection& connection = state_->connection();
  for (uint64_t done = 0; done < out.size(); done += kReadChunkBytes) {
    const uint64_t chunk = std::min<uint64_t>(kReadChunkBytes,
                                              out.size() - done);
    HRX_ASSIGN_OR_RETURN(View part, src.Slice(done, chunk));
    auto context = connection.Context();
    hrx::v1::ReadRequest request;
    request.set_stream(handle());
    SetView(part, request.mutable_src());
    hrx::v1::ReadResponse response;
    HRX_RETURN_IF_ERROR(connection.Check(
        connection.streams().Read(context.get(), request, &response)));
    if (response.data().size() != chunk) {
      return absl::InternalError(absl::StrFormat(
          "short_read: the daemon returned %u bytes for a %u-byte read. Fix: "
          "report this daemon bug.",
          response.data().size(), chunk));
    }
    std::memcpy(out.data() + done, response.data().data(), chunk);
  }
  return absl::OkStatus();
}

absl::Status Stream::Flush() { return state_->FlushForCaller(); }

absl::Status Stream::Synchronize() {
  HRX_RETURN_IF_ERROR(state_->FlushForCaller());
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::SynchronizeRequest request;
  request.set_stream(handle());
  hrx::v1::SynchronizeResponse response;
  return connection.Check(
      connection.streams().Synchronize(context.get(), request, &response));
}

absl::StatusOr<std::vector<uint8_t>> Readback::Wait(Stream& stream) {
  if (stream.state_.get() != stream_) {
    return absl::FailedPreconditionError(
        "readback_foreign_stream: this readback was queued on another "
        "stream. Fix: wait on the stream that called Read.");
  }
  std::vector<uint8_t> bytes(length_);
  HRX_ASSIGN_OR_RETURN(View whole, buffer_.Slice(0, length_));
  HRX_RETURN_IF_ERROR(stream.ReadBlocking(whole, bytes));
  return bytes;
}

}  // namespace hrx
