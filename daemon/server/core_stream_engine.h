// hrxd's stream engine (daemon/stream/stream_engine.h): a conversation's
// session served by hrxd's core. Handles are opened with the daemon's
// handle authority (decode.h's Caller), commands run through the core's
// command path, and refusals are counted in hrxd_refusals_total.
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

class CoreStreamEngine final : public StreamEngine {
 public:
  CoreStreamEngine(Core& core, const Caller& caller)
      : core_(core), caller_(caller) {}

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
  Core& core_;
  const Caller caller_;
  // Progress's: the polled stream's queue, looked up once, and held only
  // when it needs polling (a lease keeps a retired queue from the pool's
  // sweep until the ring ends).
  uint64_t polled_stream_ = 0;
  QueueLease polled_queue_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_CORE_STREAM_ENGINE_H_
