// What a command stream's conversation (stream_conversation.h) asks of the
// process that runs its session's work. The conversation owns the protocol:
// one request at a time, flow control, reply order. The engine owns the
// session: it resolves the handles a request names, checks and enqueues
// commands, keeps deferred refusals for the stream's sync points and holds
// reply bytes against the tenant's budget.
//
// hrxd's engine is its core (daemon/server/core_stream_engine.h). The seam
// exists so that the same conversation, and its ring transport
// (ring_server.h), can run where the session's queues are: for a tenant
// with an executor, in that executor, against the objects hrxd granted it
// (docs/architecture.md, "Executors").
//
// One engine serves one session. Requests arrive in their wire form: how a
// handle is resolved (hrxd opens sealed handles; an executor looks them up
// in what hrxd installed) is the engine's business, and its refusals must
// be the same either way.
//
// Callbacks (`done`) run exactly once, possibly inline before the call
// returns, possibly on a queue's thread; they must not call the engine
// back under a lock the engine holds (engines release theirs first).
#ifndef HRX_DAEMON_STREAM_STREAM_ENGINE_H_
#define HRX_DAEMON_STREAM_STREAM_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// Keeps a charge (a read's reply bytes) until it is released.
using StreamHold = std::shared_ptr<const void>;
using StreamDone = std::function<void(absl::Status)>;
// The number of commands enqueued, or why the batch was not.
using BatchDone = std::function<void(absl::StatusOr<size_t>)>;

// A read checked against its buffer, with its reply bytes held.
struct StreamRead {
  uint64_t buffer = 0;  // the engine's own name for the buffer
  uint64_t offset = 0;
  uint64_t length = 0;
  // The most data the reply will carry (a read past the engine's inline
  // bound is refused when it runs): what the conversation counts as owed.
  uint64_t reply_bytes = 0;
  StreamHold hold;  // the reply's bytes, until the client has taken it
};

class StreamEngine {
 public:
  virtual ~StreamEngine() = default;

  // OK while the session lives. Once it ended: NOT_FOUND stale_handle or
  // unknown_handle when its client closed it, else why it was ended (an
  // eviction, a lost executor), for the client to hear.
  virtual absl::Status SessionStatus() = 0;
  // Counts a refusal the conversation sends (by its reason).
  virtual void CountRefusal(const absl::Status& refusal) = 0;

  // Creates the conversation's stream; fills `opened` (its sealed handle
  // and queue) and returns the engine's name for it.
  virtual absl::StatusOr<uint64_t> OpenStream(
      hrx::v1::CreateStreamResponse* opened) = 0;
  // The stream's name dies at once; `done` runs after its queued work.
  virtual void DestroyStream(uint64_t stream, StreamDone done) = 0;

  // Keeps `refusal` for the stream's next sync point, in order with the
  // stream's other operations.
  virtual void DeferRefusal(uint64_t stream, absl::Status refusal) = 0;
  // Resolves and checks every command, then enqueues them in order
  // (`commands` is valid only during the call). A refused command (bad
  // handle, span, launch) is kept for the next sync point and `done` gets
  // OK(0); `done` gets an error only when the batch
  // could not be taken at all (the caller defers it). A batch that waits
  // for staging calls `done` when it is enqueued.
  virtual void Submit(
      uint64_t stream,
      const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands,
      BatchDone done) = 0;
  // Completes after everything submitted so far; reports (and clears) a
  // deferred refusal first.
  virtual void Synchronize(uint64_t stream, StreamDone done) = 0;
  // Resolves `src` and holds its bytes of the tenant's reply budget.
  virtual absl::StatusOr<StreamRead> PrepareRead(const hrx::v1::View& src) = 0;
  // Fills `*out` (which outlives `done`) with the read's bytes, ordered
  // after the stream's earlier work.
  virtual void Read(uint64_t stream, const StreamRead& read, std::string* out,
                    StreamDone done) = 0;
  // Without waiting: whether everything submitted so far has completed.
  virtual absl::StatusOr<bool> Poll(uint64_t stream) = 0;
  // Launches the graph exec `exec` on the stream one node at a time and
  // fills `*profile` (which outlives `done`) with each node's device time.
  virtual void LaunchProfiled(uint64_t stream, const hrx::v1::Handle& exec,
                              hrx::v1::Profile* profile, StreamDone done) = 0;

  // Retires the stream's finished device work on the calling thread, if
  // its queue needs help for that (backend::Queue::Poll): a transport that
  // spins while a reply is owed calls it, so the reply needs no other
  // thread's wake-up. Completion callbacks (of any stream on the same
  // queue) may run in it; it never waits for the device. Called by one
  // thread at a time. Returns whether anything was retired.
  virtual bool Progress(uint64_t stream) = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_STREAM_STREAM_ENGINE_H_
