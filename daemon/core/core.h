// The daemon's domain logic: sessions, their buffers and streams, and the
// ordered command path onto the backend's queues. Speaks core types and
// absl::Status; knows nothing of gRPC, so it is tested directly.
//
// Every handle and view a caller passes is untrusted and checked here.
// Methods that wait for the device take a `done` callback instead of
// blocking; it runs exactly once, possibly on a backend thread, and must not
// call back into Core.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_CORE_H_
#define HRX_DAEMON_CORE_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/handle_table.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/types.h"

namespace hrx::daemon {

struct CoreOptions {
  uint32_t queue_count = kDefaultQueueCount;
};

using DoneCallback = std::function<void(absl::Status)>;

class Core {
 public:
  Core(std::unique_ptr<backend::Backend> backend, const CoreOptions& options);
  ~Core();  // drains every queue
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // RESOURCE_EXHAUSTED past kMaxSessions; INVALID_ARGUMENT for a client name
  // longer than kMaxClientNameBytes.
  absl::StatusOr<uint64_t> OpenSession(const std::string& client_name);
  // Frees the session's handles at once; `done` runs once the session's
  // queued work has completed.
  void CloseSession(uint64_t session,
                    std::function<void(absl::StatusOr<CloseSummary>)> done);

  DeviceInfo device_info() const;
  CoreStatus status() const;

  // A zero-byte request is rounded up to one byte.
  absl::StatusOr<BufferInfo> Allocate(uint64_t session, uint64_t bytes,
                                      bool zeroed);
  // The handle dies at once; the memory lives until queued uses complete.
  absl::Status Free(uint64_t session, uint64_t buffer);

  absl::StatusOr<StreamInfo> CreateStream(uint64_t session);
  // The handle dies at once; `done` runs after the stream's queued work.
  void DestroyStream(uint64_t session, uint64_t stream, DoneCallback done);

  // Checks every command, then enqueues all of them in order; a batch with a
  // bad command is refused whole. Returns the number of commands enqueued.
  absl::StatusOr<size_t> Submit(uint64_t session, uint64_t stream,
                                std::vector<Command> commands);
  void Synchronize(uint64_t session, uint64_t stream, DoneCallback done);
  // Fills `*out` (which must outlive `done`) with the view's bytes, ordered
  // after earlier work on the stream.
  void Read(uint64_t session, uint64_t stream, const ViewRef& src,
            std::string* out, DoneCallback done);

  // Waits for everything enqueued so far (daemon shutdown).
  void Drain();

 private:
  struct BufferEntry {
    backend::MemoryRef memory;
  };
  struct StreamEntry {
    uint32_t queue_index = 0;
    backend::Queue* queue = nullptr;
  };
  struct Session {
    std::string client_name;
    HandleTable<BufferEntry> buffers{shared::HandleKind::kBuffer};
    HandleTable<StreamEntry> streams{shared::HandleKind::kStream};
  };
  // A checked view: the memory it names and a range known to lie inside it.
  struct ResolvedView {
    backend::MemoryRef memory;
    uint64_t offset;
    uint64_t length;
  };

  absl::StatusOr<Session*> FindSessionLocked(uint64_t session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<StreamEntry*> FindStreamLocked(uint64_t session,
                                                uint64_t stream,
                                                std::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::StatusOr<ResolvedView> ResolveView(Session& session,
                                                  const ViewRef& view,
                                                  std::string_view what);
  absl::Status EnqueueChecked(Session& session, backend::Queue& queue,
                              std::vector<Command>& commands)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::unique_ptr<backend::Backend> backend_;
  const absl::Time started_;
  QueuePool queues_;  // internally synchronized

  mutable absl::Mutex mu_;
  HandleTable<std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_){
      shared::HandleKind::kSession};
  uint64_t commands_submitted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_CORE_H_
