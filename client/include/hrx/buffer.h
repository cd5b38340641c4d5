// libhrx buffers and views: device allocations owned by the daemon, named by
// handles, and checked byte ranges of them.
//
// Threading: a Buffer may be destroyed from any thread. Views are values.
#ifndef HRX_CLIENT_INCLUDE_HRX_BUFFER_H_
#define HRX_CLIENT_INCLUDE_HRX_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hrx/handle.h"
#include "hrx/mapping.h"
#include "hrx/unique_fd.h"

namespace hrx {

namespace client::internal {
class Connection;
}  // namespace client::internal

class Buffer;

// A checked range [offset, offset + length) of a buffer. Made only through
// Buffer::Binding/Slice and View::Slice, so its range always lies inside the
// buffer; the daemon checks it again. A View does not keep its buffer alive:
// using one after the buffer is freed is refused by the daemon (NOT_FOUND,
// "stale_handle").
class View {
 public:
  // A subrange relative to this view; INVALID_ARGUMENT ("view_out_of_range")
  // when offset + length passes the view's end, without wrapping.
  absl::StatusOr<View> Slice(uint64_t offset, uint64_t length) const;

  const Handle& buffer_handle() const { return handle_; }
  uint64_t offset() const { return offset_; }  // from the buffer's start
  uint64_t length() const { return length_; }
  bool empty() const { return length_ == 0; }
  uint64_t brand() const { return brand_; }

 private:
  friend class Buffer;
  View(Handle handle, uint64_t brand, uint64_t offset, uint64_t length)
      : handle_(handle), brand_(brand), offset_(offset), length_(length) {}

  Handle handle_;
  uint64_t brand_;
  uint64_t offset_;
  uint64_t length_;
};

// A device allocation. Move-only; destroying it frees the handle after
// sending any commands the client has issued but not yet sent. The daemon
// keeps the memory until queued uses complete.
class Buffer {
 public:
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  ~Buffer();

  uint64_t bytes() const { return bytes_; }
  const Handle& handle() const { return handle_; }
  // Identifies the backing allocation: a pooled allocation shows its reuse.
  uint64_t allocation_id() const { return allocation_id_; }
  // The stream that allocated it.
  const Handle& origin_stream() const { return origin_stream_; }

  // The whole allocation.
  View Binding() const;
  // INVALID_ARGUMENT ("view_out_of_range") past the end.
  absl::StatusOr<View> Slice(uint64_t offset, uint64_t length) const;

  // Frees now and reports the daemon's answer (the destructor ignores it).
  absl::Status Free();

  // Offers this buffer to every session of `tenant`, or to one session (the
  // `session` field of that session's handles). Returns the grant id to pass
  // to the grantee, who calls Stream::Import. See docs/security.md.
  absl::StatusOr<uint64_t> GrantToTenant(const std::string& tenant) const;
  absl::StatusOr<uint64_t> GrantToSession(uint64_t session) const;
  // Stops further imports of a grant this buffer's session made.
  absl::Status Revoke(uint64_t grant) const;

  // Maps the buffer's memory into this process (a shared-memory resident
  // handle); see hrx/mapping.h for the coherence rules.
  absl::StatusOr<Mapping> Map() const;
  // A dma-buf descriptor of the buffer (owned by the caller) and the offset
  // of the buffer within it. FAILED_PRECONDITION naming what is missing
  // where the daemon cannot make one.
  struct DmaBuf {
    UniqueFd fd;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  absl::StatusOr<DmaBuf> ExportDmaBuf() const;

 private:
  friend class Stream;
  Buffer(std::shared_ptr<client::internal::Connection> connection,
         Handle handle, uint64_t bytes, uint64_t allocation_id,
         Handle origin_stream);

  std::shared_ptr<client::internal::Connection> connection_;
  Handle handle_;
  uint64_t bytes_ = 0;
  uint64_t allocation_id_ = 0;
  Handle origin_stream_;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_BUFFER_H_
