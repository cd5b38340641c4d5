// libhrx streams: ordered timelines of device work in the daemon, mirroring
// the in-process runtime's Stream. Enqueue operations (Fill, Copy, Upload)
// are checked here, kept in a batch and sent together; only Synchronize,
// Read/Readback::Wait and the *Blocking calls wait for the daemon. A batch
// the daemon refuses is refused whole; the error is returned by the call
// that sent it (or the next call on the stream, when a buffer's destruction
// sent it).
//
// Threading: a Stream is used from one thread at a time.
#ifndef HRX_CLIENT_INCLUDE_HRX_STREAM_H_
#define HRX_CLIENT_INCLUDE_HRX_STREAM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hrx/buffer.h"

namespace hrx {

namespace client::internal {
class Connection;
class StreamState;
}  // namespace client::internal

// Upload payloads travel in commands of at most this many bytes.
inline constexpr uint64_t kUploadChunkBytes = uint64_t{1} << 20;
// A batch is sent once it holds this many payload bytes or commands.
inline constexpr uint64_t kBatchFlushBytes = uint64_t{4} << 20;
inline constexpr size_t kBatchFlushCommands = 1024;
// Reads are fetched in replies of at most this many bytes.
inline constexpr uint64_t kReadChunkBytes = uint64_t{4} << 20;

class Stream;

// An owned destination filled in stream order; Wait returns its bytes.
class Readback {
 public:
  // Waits on the originating stream only; FAILED_PRECONDITION
  // ("readback_foreign_stream") for another stream.
  absl::StatusOr<std::vector<uint8_t>> Wait(Stream& stream);

 private:
  friend class Stream;
  Readback(Buffer buffer, uint64_t length, const void* stream)
      : buffer_(std::move(buffer)), length_(length), stream_(stream) {}
  Buffer buffer_;
  uint64_t length_;
  const void* stream_;  // identity of the originating stream; never read
};

class Stream {
 public:
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  // Sends pending commands and destroys the stream; the daemon drains it.
  ~Stream();

  uint64_t handle() const;
  uint32_t queue() const;  // the native queue this stream runs on

  // Device memory with unspecified contents; 0 bytes rounds up to 1.
  absl::StatusOr<Buffer> Allocate(uint64_t bytes);
  // Device memory whose bytes are all zero.
  absl::StatusOr<Buffer> AllocateZeroed(uint64_t bytes);

  absl::Status Fill(const View& dst, uint8_t value);
  // Equal, non-overlapping views.
  absl::Status Copy(const View& dst, const View& src);
  // Writes `bytes` at dst's start; bytes.size() must fit in dst. The bytes
  // are copied before returning.
  absl::Status Upload(const View& dst, std::span<const uint8_t> bytes);
  absl::Status UploadBlocking(const View& dst, std::span<const uint8_t> bytes);

  // Queues a copy of `src` into an owned buffer, in stream order.
  absl::StatusOr<Readback> Read(const View& src);
  // Reads src after all earlier work; out.size() must equal src.length().
  absl::Status ReadBlocking(const View& src, std::span<uint8_t> out);

  // Sends pending commands without waiting for them to run.
  absl::Status Flush();
  // Waits until everything issued on this stream has run.
  absl::Status Synchronize();

 private:
  friend class Device;
  friend class Readback;
  explicit Stream(std::shared_ptr<client::internal::StreamState> state);
  absl::Status CheckOwned(const View& view, const char* what) const;
  absl::StatusOr<Buffer> AllocateWith(uint64_t bytes, bool zeroed);

  std::shared_ptr<client::internal::StreamState> state_;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_STREAM_H_
