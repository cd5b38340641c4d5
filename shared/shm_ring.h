// The shared-memory data plane of one stream: a region that hrxd creates and
// the client maps (through a ticket on the side channel), holding two
// single-producer, single-consumer byte pipes and their doorbells:
//
//   submit:   client -> hrxd   serialized hrx.v1.StreamRequest messages
//   complete: hrxd -> client   serialized hrx.v1.StreamReply messages
//
// The messages are exactly those of Streams.Open, framed by a 4-byte
// little-endian length, so the ring carries the same protocol with the same
// checks as the gRPC stream; only the transport differs. A message may be
// larger than a pipe: it is written as space frees up.
//
// Each side treats everything the other side writes as hostile: positions
// are validated on every read (a position that moved backwards, or claims
// more bytes than the pipe holds, breaks the ring), bytes are copied out
// of the region before they are parsed, and lengths are checked against
// kMaxRingMessageBytes before anything is allocated. A client that
// scribbles on its region can only break its own stream.
//
// Doorbells are futex words in the region (shared, not process-private):
// a side that has nothing to do spins briefly, then announces that it
// sleeps and waits on its bell; the other side bumps the bell after
// publishing and wakes it only if it announced sleep.
#ifndef HRX_SHARED_SHM_RING_H_
#define HRX_SHARED_SHM_RING_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hrx::shared {

inline constexpr uint32_t kRingMagic = 0x52585248;  // "HRXR"
inline constexpr uint32_t kRingVersion = 1;
// The header's size; the pipes' bytes follow it.
inline constexpr uint64_t kRingHeaderBytes = 4096;
// The longest message a ring's end carries (RingHeader::finish_message).
inline constexpr uint32_t kRingFinishMessageBytes = 1024;
// Pipe sizes of a region hrxd creates: a small sync round trip and a
// batch of a thousand small commands each fit at once; larger messages
// stream through.
inline constexpr uint64_t kRingSubmitBytes = uint64_t{1} << 20;
inline constexpr uint64_t kRingCompleteBytes = uint64_t{256} << 10;
// The largest message either side accepts: gRPC's limit for the same
// message on Streams.Open (a batch or a read reply with its framing).
inline constexpr uint64_t kMaxRingMessageBytes = uint64_t{16} << 20;

// One pipe's positions: bytes written and read since the start. Each is
// written by one side only.
struct alignas(64) RingPosition {
  std::atomic<uint64_t> value{0};
};

// A doorbell: `bell` is the futex word; `sleeping` counts the threads
// waiting on it (a hint: a wrong count costs a wake-up, never a lost one,
// since a waiter sleeps only while the bell has not moved).
struct alignas(64) RingBell {
  std::atomic<uint32_t> bell{0};
  std::atomic<uint32_t> sleeping{0};
};

struct RingHeader {
  // Written by hrxd before the region is shared; read once by the client.
  uint32_t magic;
  uint32_t version;
  uint64_t submit_offset;
  uint64_t submit_bytes;
  uint64_t complete_offset;
  uint64_t complete_bytes;

  RingPosition submit_written;    // client
  RingPosition submit_read;       // hrxd
  RingPosition complete_written;  // hrxd
  RingPosition complete_read;     // client
  RingBell daemon_bell;           // hrxd waits here
  RingBell client_bell;           // the client waits here
  // The client will send nothing more (its half-close): hrxd drains and
  // destroys the stream, then sets `finished`.
  alignas(64) std::atomic<uint32_t> client_closed{0};
  // hrxd has ended the stream: nothing more will be read or written.
  std::atomic<uint32_t> finished{0};
  std::atomic<int32_t> finish_code{0};  // absl::StatusCode of the end
  // Why, as the status's message (at most kRingFinishMessageBytes; 0 bytes
  // when the end needs no words): written before `finished` is set.
  uint32_t finish_message_bytes;
  char finish_message[kRingFinishMessageBytes];
  // Taken (0 to 1) by whoever writes the end's code and message: hrxd and
  // the executor serving the ring may both end it at once (a stop racing the
  // executor's own end), and one writer's code with the other's words would
  // tell the client something neither said. The client never reads it.
  std::atomic<uint32_t> finish_claimed{0};
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// The region's total size for the given pipe sizes.
uint64_t RingRegionBytes(uint64_t submit_bytes, uint64_t complete_bytes);
// Writes a fresh header into `region` (hrxd, before sharing it).
void InitRingRegion(void* region, uint64_t submit_bytes,
                    uint64_t complete_bytes);
// Checks a mapped region's header against its size (the client, which
// trusts hrxd but not a wrong mapping). FAILED_PRECONDITION naming what
// does not match.
absl::Status CheckRingRegion(const void* region, uint64_t region_bytes);

// The writing end of a pipe. Keeps its own position: what the reader
// writes into the writer's position cannot move it.
class PipeWriter {
 public:
  PipeWriter(uint8_t* data, uint64_t capacity, RingPosition* written,
             const RingPosition* read);

  // Copies as much of `bytes` as fits and publishes it; returns how much
  // was copied. DATA_LOSS when the reader's position is impossible.
  absl::StatusOr<uint64_t> Push(std::string_view bytes);
  // Bytes the reader has not taken yet (0 once it has caught up).
  absl::StatusOr<uint64_t> Unread() const;
  // Bytes written since the start (this side's own count).
  uint64_t position() const { return position_; }

 private:
  absl::StatusOr<uint64_t> FreeBytes() const;

  uint8_t* const data_;
  const uint64_t capacity_;
  RingPosition* const written_;
  const RingPosition* const read_;
  uint64_t position_ = 0;
};

// The reading end of a pipe.
class PipeReader {
 public:
  PipeReader(const uint8_t* data, uint64_t capacity,
             const RingPosition* written, RingPosition* read);

  // Bytes available now. DATA_LOSS when the writer's position is
  // impossible (behind what was read, or more than the pipe holds).
  absl::StatusOr<uint64_t> Available() const;
  // Copies up to `length` available bytes to `out`; returns how many.
  absl::StatusOr<uint64_t> Pull(uint8_t* out, uint64_t length);
  // Bytes read since the start (this side's own count).
  uint64_t position() const { return position_; }

 private:
  const uint8_t* const data_;
  const uint64_t capacity_;
  const RingPosition* const written_;
  RingPosition* const read_;
  uint64_t position_ = 0;
};

// Frames messages onto a pipe: a 4-byte little-endian length, then the
// bytes. A message larger than the free space is kept and finished by
// later calls to Continue.
class MessageWriter {
 public:
  explicit MessageWriter(PipeWriter pipe) : pipe_(pipe) {}

  // Starts `message` (only when idle()); writes what fits now. True when
  // all of it is in the pipe.
  absl::StatusOr<bool> Start(std::string message);
  // Writes more of the message in progress; true once it is all in.
  absl::StatusOr<bool> Continue();
  bool idle() const { return pending_.size() == sent_; }
  // Bytes of the message in progress not yet in the pipe.
  uint64_t unsent() const { return pending_.size() - sent_; }
  const PipeWriter& pipe() const { return pipe_; }

 private:
  PipeWriter pipe_;
  std::string pending_;  // length prefix and message
  uint64_t sent_ = 0;
};

// Reassembles framed messages from a pipe.
class MessageReader {
 public:
  MessageReader(PipeReader pipe, uint64_t max_message_bytes)
      : pipe_(pipe), max_message_bytes_(max_message_bytes) {}

  // Takes what is available; true with the message in `out` once one is
  // whole. The message's buffer grows with the bytes that arrive, never
  // ahead of them. RESOURCE_EXHAUSTED "ring_message_too_large" for a length
  // past the limit (before anything is allocated); DATA_LOSS for an impossible
  // position. The ring cannot be read past either.
  absl::StatusOr<bool> Next(std::string* out);
  // Whether a message is partly read.
  bool in_message() const { return header_read_ != 0; }
  // Bytes taken off the pipe since the start (this side's own count).
  uint64_t position() const { return pipe_.position(); }

 private:
  PipeReader pipe_;
  const uint64_t max_message_bytes_;
  uint8_t header_[4] = {};
  uint64_t header_read_ = 0;
  uint64_t length_ = 0;
  std::string body_;
  uint64_t body_read_ = 0;
};

// The ends of a region's pipes (`region` starts with its header): the
// client writes submit and reads complete, hrxd the reverse.
PipeWriter SubmitWriter(void* region);
PipeReader SubmitReader(void* region);
PipeWriter CompleteWriter(void* region);
PipeReader CompleteReader(void* region);

// Doorbells. Ring publishes work to a waiter; Wait sleeps on `bell` unless
// it moved from `seen` (the value read before checking for work), for at
// most `timeout`.
void RingDoorbell(RingBell& bell);
void WaitOnDoorbell(RingBell& bell, uint32_t seen, absl::Duration timeout);

}  // namespace hrx::shared

#endif  // HRX_SHARED_SHM_RING_H_
