// A session's stream engine (daemon/stream/stream_engine.h) over the core's
// units: hrxd's own (handles opened with the daemon's handle authority,
// refusals counted in hrxd_refusals_total), or an executor's copies of them
// for the sessions whose rings it serves (handles opened from what hrxd
// installed there: daemon/executor/executor_sessions.h). Either way the
// commands run through the same command path, with the same refusals.
//
// Thread-safe (the core is; the caller is immutable), but for Progress,
// which one thread at a time calls (a ring's serving thread).
#ifndef HRX_DAEMON_SERVER_CORE_STREAM_ENGINE_H_
#define HRX_DAEMON_SERVER_CORE_STREAM_ENGINE_H_

#include <cstdint>
#include <string>

#include "daemon/core/core.h"
#include "daemon/core/queue_pool.h"
#include "daemon/server/decode.h"
#include "daemon/stream/stream_engine.h"

namespace hrx::daemon {

// The units an engine works with.
struct StreamUnits {
  SessionTable& sessions;
  CommandPath& commands;
  Graphs& graphs;
  RefusalCounter& refusals;
};

class CoreStreamEngine final : public StreamEngine {
 public:
  CoreStreamEngine(Core& core, const Caller& caller)
      : CoreStreamEngine(StreamUnits{core.sessions(), core.commands(),
                                     core.graphs(), core.refusals()},
                         caller) {}
  // `caller`'s handle opener outlives the engine.
  CoreStreamEngine(StreamUnits units, const Caller& caller)
      : units_(units), caller_(caller) {}

  absl::Status SessionStatus() override;
  void CountRefusal(const absl::Status& refusal) override;
  absl::StatusOr<uint64_t> OpenStream(
      hrx::v1::CreateStreamResponse* opened) override;
  void DestroyStream(uint64_t stream, StreamDone done) override;
  void DeferRefusal(uint64_t stream, absl::Status refusal) override;
  void Submit(
      uint64_t stream,
      const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands,
      BatchDone done) override;
  void Synchronize(uint64_t stream, StreamDone done) override;
  absl::StatusOr<StreamRead> PrepareRead(const hrx::v1::View& src) override;
  void Read(uint64_t stream, const StreamRead& read, std::string* out,
            StreamDone done) override;
  absl::StatusOr<bool> Poll(uint64_t stream) override;
  void LaunchProfiled(uint64_t stream, const hrx::v1::Handle& exec,
                      hrx::v1::Profile* profile, StreamDone done) override;
  bool Progress(uint64_t stream) override;

 private:
  const StreamUnits units_;
  const Caller caller_;
  // Progress's: the polled stream's queue, looked up once, and held only
  // when it needs polling (a lease keeps a retired queue from the pool's
  // sweep until the ring ends).
  uint64_t polled_stream_ = 0;
  QueueLease polled_queue_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_CORE_STREAM_ENGINE_H_
