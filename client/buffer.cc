#include "hrx/buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "client/internal/fd_channel.h"
#include "shared/refusal.h"
#include "shared/span_check.h"

namespace hrx {

absl::StatusOr<View> View::Slice(uint64_t offset, uint64_t length) const {
  if (absl::Status span =
          shared::CheckSpan("slice view", offset, length, length_);
      !span.ok()) {
    return span;
  }
  return View(handle_, brand_, offset_ + offset, length);
}

Buffer::Buffer(std::shared_ptr<client::internal::Connection> connection,
               Handle handle, uint64_t bytes, uint64_t allocation_id,
               Handle origin_stream)
    : connection_(std::move(connection)),
      handle_(handle),
      bytes_(bytes),
      allocation_id_(allocation_id),
      origin_stream_(origin_stream) {}

Buffer::Buffer(Buffer&& other) noexcept
    : connection_(std::move(other.connection_)),
      handle_(std::exchange(other.handle_, Handle{})),
      bytes_(std::exchange(other.bytes_, 0)),
      allocation_id_(std::exchange(other.allocation_id_, 0)),
      origin_stream_(std::exchange(other.origin_stream_, Handle{})) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    (void)Free();
    connection_ = std::move(other.connection_);
    handle_ = std::exchange(other.handle_, Handle{});
    bytes_ = std::exchange(other.bytes_, 0);
    allocation_id_ = std::exchange(other.allocation_id_, 0);
    origin_stream_ = std::exchange(other.origin_stream_, Handle{});
  }
  return *this;
}

Buffer::~Buffer() { (void)Free(); }

View Buffer::Binding() const {
  return View(handle_, connection_ ? connection_->brand() : 0, 0, bytes_);
}

absl::StatusOr<View> Buffer::Slice(uint64_t offset, uint64_t length) const {
  return Binding().Slice(offset, length);
}

absl::Status Buffer::Free() {
  if (connection_ == nullptr) return absl::OkStatus();
  std::shared_ptr<client::internal::Connection> connection =
      std::move(connection_);
  // Commands already issued against this buffer go out first, so the daemon
  // sees them before the free and keeps the memory until they ran.
  (void)connection->FlushAll();
  auto context = connection->Context();
  hrx::v1::FreeRequest request;
  client::internal::ToProto(std::exchange(handle_, Handle{}),
                            request.mutable_buffer());
  hrx::v1::FreeResponse response;
  return connection->Check(
      connection->buffers().Free(context.get(), request, &response));
}

namespace {

absl::StatusOr<uint64_t> SendGrant(client::internal::Connection* connection,
                                   const Handle& handle,
                                   hrx::v1::GrantRequest request) {
  if (connection == nullptr) {
    return Refusal(Reason::kFreedBuffer,
                   "grant: this Buffer was freed or moved from. Fix: grant "
                   "a live buffer.");
  }
  client::internal::ToProto(handle, request.mutable_buffer());
  auto context = connection->Context();
  hrx::v1::GrantResponse response;
  absl::Status status = connection->Check(
      connection->buffers().Grant(context.get(), request, &response));
  if (!status.ok()) return status;
  return response.grant();
}

}  // namespace

namespace {

struct Exported {
  shared::UniqueFd fd;
  hrx::v1::ExportResponse response;
};

absl::StatusOr<Exported> ExportAs(client::internal::Connection* connection,
                                  const Handle& handle,
                                  hrx::v1::HandleKind kind) {
  if (connection == nullptr) {
    return Refusal(Reason::kFreedBuffer,
                   "export: this Buffer was freed or moved from. Fix: "
                   "export a live buffer.");
  }
  auto context = connection->Context();
  hrx::v1::ExportRequest request;
  client::internal::ToProto(handle, request.mutable_buffer());
  request.set_kind(kind);
  Exported exported;
  absl::Status status = connection->Check(
      connection->buffers().Export(context.get(), request, &exported.response));
  if (!status.ok()) return status;
  auto fd = client::internal::RedeemTicket(connection->fd_socket(),
                                           exported.response.ticket(),
                                           connection->Deadline());
  if (!fd.ok()) return fd.status();
  exported.fd = *std::move(fd);
  return exported;
}

}  // namespace

absl::StatusOr<Mapping> Buffer::Map() const {
  auto exported =
      ExportAs(connection_.get(), handle_, hrx::v1::HANDLE_KIND_SHM);
  if (!exported.ok()) return exported.status();
  const uint64_t size = exported->response.bytes();
  void* data =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
           exported->fd.get(), static_cast<off_t>(exported->response.offset()));
  if (data == MAP_FAILED) {
    return Refusal(
        Reason::kMapFailed,
        absl::StrFormat(
            "mmap of a %u-byte buffer: %s. Fix: free address space or "
            "map a smaller buffer.",
            size, std::strerror(errno)));
  }
  // The mapping keeps the pages; the descriptor can go now.
  return Mapping(connection_, static_cast<uint8_t*>(data), size,
                 exported->response.export_id());
}

absl::StatusOr<Buffer::DmaBuf> Buffer::ExportDmaBuf() const {
  auto exported =
      ExportAs(connection_.get(), handle_, hrx::v1::HANDLE_KIND_DMABUF);
  if (!exported.ok()) return exported.status();
  return DmaBuf{std::move(exported->fd), exported->response.offset(),
                exported->response.bytes()};
}

namespace client::internal {
absl::Status MappingNotTyped(uint64_t mapping_bytes, uint64_t element_bytes) {
  return Refusal(
      Reason::kMappingNotTyped,
      absl::StrFormat("a %u-byte mapping is not a whole number of %u-byte "
                      "elements. Fix: map a buffer sized for the element type.",
                      mapping_bytes, element_bytes));
}
}  // namespace client::internal

Mapping::Mapping(Mapping&& other) noexcept
    : connection_(std::move(other.connection_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      export_id_(std::exchange(other.export_id_, 0)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    Release();
    connection_ = std::move(other.connection_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    export_id_ = std::exchange(other.export_id_, 0);
  }
  return *this;
}

Mapping::~Mapping() { Release(); }

void Mapping::Release() {
  if (data_ == nullptr) return;
  munmap(data_, size_);
  data_ = nullptr;
  if (connection_ == nullptr) return;
  auto context = connection_->Context();
  hrx::v1::ReleaseExportRequest request;
  request.set_export_id(export_id_);
  hrx::v1::ReleaseExportResponse response;
  (void)connection_->buffers().ReleaseExport(context.get(), request, &response);
  connection_.reset();
}

absl::StatusOr<uint64_t> Buffer::GrantToTenant(
    const std::string& tenant) const {
  hrx::v1::GrantRequest request;
  request.set_tenant(tenant);
  return SendGrant(connection_.get(), handle_, std::move(request));
}

absl::StatusOr<uint64_t> Buffer::GrantToSession(uint64_t session) const {
  hrx::v1::GrantRequest request;
  request.set_session(session);
  return SendGrant(connection_.get(), handle_, std::move(request));
}

absl::Status Buffer::Revoke(uint64_t grant) const {
  if (connection_ == nullptr) {
    return Refusal(Reason::kFreedBuffer,
                   "revoke: this Buffer was freed or moved from. Fix: "
                   "revoke through a live buffer of the granting session.");
  }
  auto context = connection_->Context();
  hrx::v1::RevokeRequest request;
  request.set_grant(grant);
  hrx::v1::RevokeResponse response;
  return connection_->Check(
      connection_->buffers().Revoke(context.get(), request, &response));
}

}  // namespace hrx
