// Frames of hrxd's executor protocol (proto/hrx/executor/v1/executor.proto)
// on a Unix stream socket: a little-endian u32 length, then a serialized
// message; a descriptor a frame carries travels with its first bytes
// (SCM_RIGHTS) and is taken, in order, by the reader.
#ifndef HRX_DAEMON_BACKEND_REMOTE_FRAME_IO_H_
#define HRX_DAEMON_BACKEND_REMOTE_FRAME_IO_H_

#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message_lite.h"
#include "shared/unique_fd.h"

namespace hrx::backend::remote {

// A frame larger than this is a broken peer.
inline constexpr uint32_t kMaxFrameBytes = uint32_t{64} << 20;
// Descriptors received and not yet taken past this: a broken peer.
inline constexpr size_t kMaxPendingFds = 8;

// Sends frames without making a caller wait on the socket: a frame with
// nothing queued ahead of it is written at once if the socket takes it
// without blocking (the common case, and one thread wake less per round
// trip); the rest is written by the writer's own thread, in order.
// Thread-safe.
// Bytes a FrameWriter holds for a peer that does not read: past it the
// peer is cut off (the socket shut down, so its reader sees the end), never
// hrxd's memory spent on it.
inline constexpr size_t kMaxQueuedFrameBytes = size_t{256} << 20;

class FrameWriter {
 public:
  explicit FrameWriter(int socket);  // not owned; must outlive the writer
  ~FrameWriter();                    // sends what is queued, then stops
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Queues `message` (and `fd`, sent with it and then closed here).
  void Send(const google::protobuf::MessageLite& message,
            shared::UniqueFd fd = shared::UniqueFd());
  // As Send, but ahead of every frame not yet begun: a liveness ping (or its
  // answer) must not wait behind a backlog of work the peer has not read.
  void SendFirst(const google::protobuf::MessageLite& message);
  // False once a send failed (the peer is gone) or the peer left more than
  // kMaxQueuedFrameBytes unread; later frames are dropped.
  bool healthy() const;

 private:
  struct Frame {
    std::string bytes;
    shared::UniqueFd fd;
    size_t sent = 0;  // bytes already written (the fd with the first)
  };
  // Frames of a message (length prefix, then its bytes).
  static Frame Encode(const google::protobuf::MessageLite& message);
  // Queues `frame` at the back, or `first`, unless it was written at once.
  void Enqueue(Frame frame, bool first);
  void Run();
  // Writes the rest of `frame` with sendmsg `flags`; false when the socket
  // failed (with MSG_DONTWAIT, a full socket is not a failure: frame.sent
  // says how far it got).
  bool Write(Frame& frame, int flags);

  const int socket_;
  mutable absl::Mutex mu_;
  std::deque<Frame> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool healthy_ ABSL_GUARDED_BY(mu_) = true;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;     // the thread has a frame out
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // queued or being written
  std::thread thread_;
};

// Reads frames on the caller's thread. Not thread-safe: one reader.
class FrameReader {
 public:
  explicit FrameReader(int socket) : socket_(socket) {}

  // The next frame's bytes; false at end of stream or on a broken frame.
  bool Next(std::string* bytes);
  // The oldest descriptor received and not yet taken (invalid if none).
  shared::UniqueFd TakeFd();

 private:
  bool ReadFully(char* data, size_t size);

  const int socket_;
  std::deque<shared::UniqueFd> fds_;
};

}  // namespace hrx::backend::remote

#endif  // HRX_DAEMON_BACKEND_REMOTE_FRAME_IO_H_
