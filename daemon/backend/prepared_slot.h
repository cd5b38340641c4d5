// Where the backend that runs an immutable op (a dispatch) keeps its own
// prepared form of it, made on first use and dropped with the op: hrxd's
// remote queue keeps the op's id in its executor there, so a launch replayed
// from a stream's dispatch cache crosses the executor link as that id alone.
//
// One owner's form at a time (the first backend to use the op; others get
// nothing and prepare each use themselves). A copy of an op starts empty.
//
// Thread-safe.
#ifndef HRX_DAEMON_BACKEND_PREPARED_SLOT_H_
#define HRX_DAEMON_BACKEND_PREPARED_SLOT_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hrx::backend {

class PreparedSlot {
 public:
  PreparedSlot() = default;
  PreparedSlot(const PreparedSlot&) {}
  PreparedSlot& operator=(const PreparedSlot&) { return *this; }

  // What `owner` prepared here; otherwise, if the slot is empty, runs
  // `make` and keeps what it returns. `make` runs under the slot's lock:
  // anything it sends (a definition) is sent before any other thread can
  // see the form and use it. Null when another owner's form is here; an
  // error from `make` is returned and nothing is kept.
  template <typename T>
  absl::StatusOr<std::shared_ptr<const T>> GetOrMake(
      const void* owner,
      absl::FunctionRef<absl::StatusOr<std::shared_ptr<const T>>()> make)
      const {
    absl::MutexLock lock(&mu_);
    if (owner_ == nullptr) {
      absl::StatusOr<std::shared_ptr<const T>> made = make();
      if (!made.ok()) return made.status();
      owner_ = owner;
      form_ = *made;
      return made;
    }
    if (owner_ != owner) return std::shared_ptr<const T>();
    return std::static_pointer_cast<const T>(form_);
  }

 private:
  mutable absl::Mutex mu_;
  mutable const void* owner_ ABSL_GUARDED_BY(mu_) = nullptr;
  mutable std::shared_ptr<const void> form_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_PREPARED_SLOT_H_
