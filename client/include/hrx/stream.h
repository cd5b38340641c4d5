// libhrx streams: ordered timelines of device work in the daemon, mirroring
// the in-process runtime's Stream.
//
// Each Stream is one bidirectional gRPC call (Streams.Open). Enqueue
// operations (Fill, Copy, Upload, Dispatch, RecordEvent, WaitEvent) are
// checked here, kept in a batch and sent together; a batch is sent at
// synchronisation points (Synchronize, Read/Readback::Wait, ReadBlocking,
// IsIdle, event observation, a buffer's Free) and whenever it reaches
// kBatchFlushBytes of payload or kBatchFlushCommands commands. A batch the
// daemon refuses runs none of its commands; the refusal, naming the
// command's position, is returned by the next synchronisation point.
//
// Moving a Stream is safe for what it made: its events, graphs and graph
// execs refer to the stream's shared state, which the move hands over, not
// to the Stream object. Destroying the stream ends that state; a Graph
// begun on it is then refused ("stream_destroyed").
//
// Deadlines: every call that waits takes an optional deadline. The default,
// kDefaultDeadline, means now + the client's default_timeout (client.h);
// absl::InfiniteFuture() waits without bound. Past it the call returns
// DEADLINE_EXCEEDED ("deadline_exceeded") naming what it waited for; the
// stream stays usable, the work stays queued in the daemon, and later calls
// are ordered after it as usual.
//
// Threading: a Stream is used from one thread at a time.
#ifndef HRX_CLIENT_INCLUDE_HRX_STREAM_H_
#define HRX_CLIENT_INCLUDE_HRX_STREAM_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hrx/buffer.h"
#include "hrx/event.h"
#include "hrx/graph.h"
#include "hrx/kernel.h"
#include "hrx/mapping.h"

namespace hrx::v1 {
class Dispatch;
}  // namespace hrx::v1

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
// Uploads and blocking reads of at least this many bytes go through a
// shared-memory staging region the stream maps, instead of messages
// (measured: docs/performance.md). SetSharedTransferThreshold overrides it.
inline constexpr uint64_t kDefaultSharedTransferThreshold = uint64_t{64} << 10;
// Size of that staging region (one per stream, allocated on first use and
// charged to the tenant's shared bytes; without budget for it, transfers
// stay inline).
inline constexpr uint64_t kSharedStagingBytes = uint64_t{16} << 20;

// Default bound on a stream's retained scratch buffers.
inline constexpr uint64_t kDefaultScratchLimit = uint64_t{256} << 20;

using Dim3 = std::array<uint32_t, 3>;

class Stream;

// An owned destination filled in stream order; Wait returns its bytes.
class Readback {
 public:
  // Waits on the originating stream only; FAILED_PRECONDITION
  // ("readback_foreign_stream") for another stream.
  absl::StatusOr<std::vector<uint8_t>> Wait(
      Stream& stream, absl::Time deadline = kDefaultDeadline);

 private:
  friend class Stream;
  Readback(Buffer buffer, uint64_t length, const void* stream)
      : buffer_(std::move(buffer)), length_(length), stream_(stream) {}
  Buffer buffer_;
  uint64_t length_;
  const void* stream_;  // identity of the originating stream; never read
};

// Staging and cache state of a stream, read from the daemon (diagnostics).
struct CacheCounters {
  uint64_t entries = 0, bytes = 0, hits = 0, misses = 0, evictions = 0;
};
struct StreamStats {
  uint32_t queue = 0;
  uint64_t published_fence = 0;
  uint64_t completed_fence = 0;
  std::vector<uint64_t> pending_staging_ids;  // allocation ids, oldest first
  uint64_t pending_staging_bytes = 0;
  std::vector<uint64_t> completed_staging_ids;
  CacheCounters upload_staging;
  CacheCounters dispatch_cache;
  CacheCounters transfer_cache;
};

class Stream {
 public:
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  // Sends pending commands and ends the stream; the daemon drains it first.
  ~Stream();

  const Handle& handle() const;
  uint32_t queue() const;  // the native queue this stream runs on

  // --- Memory -----------------------------------------------------------
  // Device memory with unspecified contents; 0 bytes rounds up to 1.
  absl::StatusOr<Buffer> Allocate(uint64_t bytes);
  // Device memory whose bytes are all zero.
  absl::StatusOr<Buffer> AllocateZeroed(uint64_t bytes);
  // Host-coherent memory (on the cpu backend, a memfd mapping) that clients
  // will be able to map; zero-filled.
  absl::StatusOr<Buffer> AllocateShared(uint64_t bytes);

  // A handle of this session to a buffer another session granted.
  absl::StatusOr<Buffer> Import(uint64_t grant);

  // A buffer of at least `bytes` (at most twice that) from this stream's
  // scratch pool, else a fresh allocation.
  absl::StatusOr<Buffer> Scratch(uint64_t bytes);
  // Returns a buffer this stream allocated to its scratch pool (dropped when
  // past the limit). FAILED_PRECONDITION ("scratch_foreign_stream") for a
  // buffer of another stream.
  absl::Status Recycle(Buffer buffer);
  // Bounds retained scratch, evicting the largest entries first.
  void SetScratchLimit(uint64_t bytes);
  uint64_t scratch_bytes() const;

  // --- Transfers --------------------------------------------------------
  absl::Status Fill(const View& dst, uint8_t value);
  // Equal, non-overlapping views.
  absl::Status Copy(const View& dst, const View& src);
  // Writes `bytes` at dst's start; bytes.size() must fit in dst. The bytes
  // are copied before returning; the daemon stages them (bounded: at most 8
  // pending stagings or 64 MiB per stream, past which the stream completes
  // its earlier work first).
  absl::Status Upload(const View& dst, std::span<const uint8_t> bytes);
  absl::Status UploadBlocking(const View& dst, std::span<const uint8_t> bytes,
                              absl::Time deadline = kDefaultDeadline);
  // Queues a copy of `src` into an owned buffer, in stream order.
  absl::StatusOr<Readback> Read(const View& src);
  // Reads src after all earlier work; out.size() must equal src.length().
  absl::Status ReadBlocking(const View& src, std::span<uint8_t> out,
                            absl::Time deadline = kDefaultDeadline);

  // --- Kernels ----------------------------------------------------------
  // Loads `entry` from code-object bytes; the daemon learns its signature.
  absl::StatusOr<Kernel> LoadKernel(std::span<const uint8_t> code,
                                    const std::string& entry);
  absl::StatusOr<Kernel> LoadKernelFile(const std::string& path,
                                        const std::string& entry);
  // Enqueues a launch: `grid` workgroups of `block` work-items, scalars in
  // `constants` and one view per buffer argument, all in declaration order.
  absl::Status Dispatch(const Kernel& kernel, Dim3 grid, Dim3 block,
                        const Constants& constants,
                        std::span<const View> bindings);

  // --- Ordering ---------------------------------------------------------
  // Snapshots the work issued so far, without waiting.
  absl::StatusOr<Event> RecordEvent();
  // Orders later work after `event`. INVALID_ARGUMENT ("foreign_event") for
  // an event of another client's device.
  absl::Status WaitEvent(const Event& event);

  // --- Graphs -----------------------------------------------------------
  // Starts recording a graph that will replay on this stream.
  Graph BeginGraph();
  // Replays `exec` with one command, in stream order. FAILED_PRECONDITION
  // for an exec of another stream ("graph_wrong_stream"); a launch that
  // fails marks the exec, and later launches are refused ("graph_failed")
  // until GraphExec::ClearFailure.
  absl::Status Launch(const GraphExec& exec);
  // A profiled launch (FinishProfiled execs): runs the nodes one at a time
  // and returns each one's device time with its label. Waits for the launch.
  // Profiling adds barriers: diagnostic, not performance evidence.
  absl::StatusOr<std::vector<NodeProfile>> LaunchProfiled(
      const GraphExec& exec, absl::Time deadline = kDefaultDeadline);

  // Transfers of at least `bytes` use the shared staging region; 0 always,
  // UINT64_MAX never.
  void SetSharedTransferThreshold(uint64_t bytes) { shared_threshold_ = bytes; }

  // Sends pending commands (acknowledged, so later calls are ordered after).
  absl::Status Flush(absl::Time deadline = kDefaultDeadline);
  // Waits until everything issued on this stream has run.
  absl::Status Synchronize(absl::Time deadline = kDefaultDeadline);
  // Synchronize without the wait: sends pending commands, then answers
  // whether everything issued on this stream so far, up to this call, has
  // run. Each call looks at the stream as it is then, so work issued later
  // makes it false again; to watch one point of the timeline instead, use
  // RecordEvent and Event::IsComplete. Never waits for other streams' work.
  // Formerly Submit().IsComplete(); Submit().Wait() was Synchronize().
  absl::StatusOr<bool> IsIdle(absl::Time deadline = kDefaultDeadline);
  // Diagnostics: the daemon's view of this stream's staging and caches.
  absl::StatusOr<StreamStats> GetStats();

 private:
  friend class Device;
  friend class Readback;
  friend class Graph;
  explicit Stream(std::shared_ptr<client::internal::StreamState> state);
  // The checks below take the session's brand rather than a Stream, so a
  // Graph can run them with only the stream's state in hand.
  static absl::Status CheckOwned(uint64_t brand, const View& view,
                                 const char* what);
  absl::Status CheckOwned(const View& view, const char* what) const;
  absl::StatusOr<Buffer> AllocateWith(uint64_t bytes, int contents,
                                      int placement);
  // Checks a launch as the daemon will and writes it into `out`.
  static absl::Status EncodeDispatch(uint64_t brand, const Kernel& kernel,
                                     Dim3 grid, Dim3 block,
                                     const Constants& constants,
                                     std::span<const View> bindings,
                                     hrx::v1::Dispatch* out);

  // The shared staging region, mapped; false when it cannot be had.
  bool EnsureSharedStaging();
  absl::Status UploadShared(const View& dst, std::span<const uint8_t> bytes);
  absl::Status ReadShared(const View& src, std::span<uint8_t> out,
                          absl::Time deadline);

  std::shared_ptr<client::internal::StreamState> state_;
  uint64_t shared_threshold_ = kDefaultSharedTransferThreshold;
  std::unique_ptr<Buffer> shared_staging_;
  std::unique_ptr<Mapping> shared_map_;
  bool shared_staging_failed_ = false;
  bool shared_staging_busy_ = false;         // a queued copy still reads it
  std::multimap<uint64_t, Buffer> scratch_;  // by size
  uint64_t scratch_bytes_ = 0;
  uint64_t scratch_limit_ = kDefaultScratchLimit;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_STREAM_H_
