// ExecutorService's queues: each command hrxd enqueues under its own fence,
// mapped to the real queue's fence, and its completion reported back.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/executor/executor_service.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::executor {
namespace {

namespace wire = hrx::executor::v1;
using backend::Fence;
using backend::remote::DecodeCopy;
using backend::remote::DecodeDispatch;
using backend::remote::DecodedSpan;
using backend::remote::DecodeFill;
using backend::remote::DecodeSpan;
using backend::remote::DecodeWrite;
using backend::remote::UnknownObject;

}  // namespace

absl::Status ExecutorService::Enqueue(const wire::Enqueue& enqueue) {
  auto it = queues_.find(enqueue.queue());
  if (it == queues_.end()) {
    return UnknownObject("queue", enqueue.queue());
  }
  QueueState& state = *it->second;
  backend::Queue& queue = *state.queue;
  const uint64_t fence = enqueue.fence();
  while (!state.pending.empty() &&
         state.pending.front().first <= state.completed.load()) {
    state.pending.pop_front();
  }
  std::function<void(absl::Status)> done;
  auto run = [&]() -> absl::StatusOr<Fence> {
    switch (enqueue.op_case()) {
      case wire::Enqueue::kFill: {
        HRX_ASSIGN_OR_RETURN(backend::FillOp fill,
                             DecodeFill(enqueue.fill(), *this));
        return queue.EnqueueFill(fill.dst, fill.offset, fill.length,
                                 fill.value);
      }
      case wire::Enqueue::kCopy: {
        HRX_ASSIGN_OR_RETURN(backend::CopyOp copy,
                             DecodeCopy(enqueue.copy(), *this));
        return queue.EnqueueCopy(copy.dst, copy.dst_offset, copy.src,
                                 copy.src_offset, copy.length);
      }
      case wire::Enqueue::kWrite: {
        const wire::Write& write = enqueue.write();
        HRX_ASSIGN_OR_RETURN(DecodedSpan dst, DecodeWrite(write, *this));
        return queue.EnqueueWrite(
            dst.memory, dst.offset,
            std::make_shared<const std::string>(write.data()));
      }
      case wire::Enqueue::kRead: {
        HRX_ASSIGN_OR_RETURN(DecodedSpan src,
                             DecodeSpan(enqueue.read().src(), *this));
        auto data = std::make_shared<std::string>(src.length, '\0');
        done = [this, queue_id = enqueue.queue(), fence,
                data](absl::Status status) {
          if (!status.ok()) return;
          wire::Event event;
          wire::ReadData* read = event.mutable_read_data();
          read->set_queue(queue_id);
          read->set_fence(fence);
          read->set_data(std::move(*data));
          writer_.Send(event);
        };
        return queue.EnqueueRead(src.memory, src.offset, src.length,
                                 data->data());
      }
      case wire::Enqueue::kWaitFor: {
        const wire::WaitFor& wait = enqueue.wait_for();
        auto other = queues_.find(wait.other_queue());
        if (other == queues_.end()) return state.last_real;
        QueueState& waited = *other->second;
        if (wait.other_fence() <= waited.completed.load()) {
          return state.last_real;  // already complete: nothing to wait for
        }
        for (const auto& [theirs, real] : waited.pending) {
          if (theirs == wait.other_fence()) {
            return queue.EnqueueWaitFor(*waited.queue, real);
          }
        }
        return state.last_real;
      }
      case wire::Enqueue::kDispatch: {
        HRX_ASSIGN_OR_RETURN(backend::DispatchRef dispatch,
                             DecodeDispatch(enqueue.dispatch(), *this));
        return queue.EnqueueDispatch(std::move(dispatch));
      }
      case wire::Enqueue::kLaunchDispatch: {
        const uint64_t id = enqueue.launch_dispatch().dispatch();
        auto defined = dispatches_.find(id);
        if (defined == dispatches_.end()) {
          return UnknownObject("dispatch", id);
        }
        if (!defined->second.ok()) return defined->second.status();
        return queue.EnqueueDispatch(*defined->second);
      }
      case wire::Enqueue::kGraph: {
        auto graph = graphs_.find(enqueue.graph().graph());
        if (graph == graphs_.end()) {
          return UnknownObject("graph", enqueue.graph().graph());
        }
        std::shared_ptr<std::vector<uint64_t>> times;
        if (enqueue.graph().profiled()) {
          times = std::make_shared<std::vector<uint64_t>>(
              graph->second->nodes.size(), 0);
          done = [this, queue_id = enqueue.queue(), fence,
                  times](absl::Status status) {
            if (!status.ok()) return;
            wire::Event event;
            wire::Profile* profile = event.mutable_profile();
            profile->set_queue(queue_id);
            profile->set_fence(fence);
            for (uint64_t ns : *times) profile->add_nanoseconds(ns);
            writer_.Send(event);
          };
        }
        return queue.EnqueueGraph(graph->second, times.get());
      }
      case wire::Enqueue::kMarker:
      case wire::Enqueue::OP_NOT_SET:
        break;
    }
    return state.last_real;
  };
  absl::StatusOr<Fence> real = run();
  absl::Status refused;
  if (real.ok()) {
    state.last_real = *real;
  } else {
    refused = real.status();  // reported as the queue's failure
    done = nullptr;
  }
  state.pending.emplace_back(fence, state.last_real);
  state.enqueued.store(fence);
  Complete(enqueue.queue(), state, fence, state.last_real, refused,
           std::move(done));
  return absl::OkStatus();
}

void ExecutorService::Complete(uint64_t queue_id, QueueState& state,
                               uint64_t fence, Fence real, absl::Status refused,
                               std::function<void(absl::Status)> done) {
  state.queue->OnComplete(real, [this, queue_id, &state, fence,
                                 refused = std::move(refused),
                                 done = std::move(done)](absl::Status status) {
    if (!refused.ok()) status = refused;
    if (done) done(status);
    if (!status.ok() && !state.failed.exchange(true)) {
      wire::Event event;
      wire::QueueFailed* failed = event.mutable_queue_failed();
      failed->set_queue(queue_id);
      failed->set_fence(fence);
      failed->set_code(static_cast<int>(status.code()));
      failed->set_message(std::string(status.message()));
      writer_.Send(event);
    }
    // In fence order only: a later fence sharing this one's real fence
    // (a marker, a wait already satisfied) can finish first, and a
    // Progress past a read whose ReadData is not yet queued makes hrxd
    // answer the read before its bytes arrive (and drop them).
    {
      absl::MutexLock lock(&state.finished_mu);
      state.finished.insert(fence);
      uint64_t completed = state.completed.load();
      auto next = state.finished.begin();
      while (next != state.finished.end() && *next == completed + 1) {
        completed = *next;
        next = state.finished.erase(next);
      }
      if (completed == state.completed.load()) return;  // nothing new
      state.completed.store(completed);
    }
    // A queue that has caught up with everything sent to it (a sync's
    // round trip) reports from here, a thread wake sooner; a busy one
    // leaves it to the reporter, which folds many completions into one
    // event.
    const bool caught_up = state.completed.load() >= state.enqueued.load() &&
                           !MoreRequestsWaiting();
    {
      absl::MutexLock lock(&mu_);
      dirty_[queue_id] = &state;
      if (!caught_up) return;
    }
    SendProgress();
  });
}

void ExecutorService::ExitForLostDevice(const absl::Status& why) {
  // The fault lost this executor's device context (a GPU fault): nothing
  // more can run here, whichever path found it (a queue hrxd drives, or a
  // ring served here). The failure is on its way to its waiters (through
  // hrxd, or written into the ring): the process ends shortly after, so
  // that hrxd starts a fresh one, and no other executor is touched.
  // Runs on the thread that found the fault, under its queue's lock: the
  // log line and the wait go to a thread of their own (the failure is sent
  // once that lock is released, well within the wait).
  try {
    std::thread([message = std::string(why.message())] {
      std::fprintf(stderr,
                   "hrxd executor: the device context is lost (%s); ending "
                   "so that hrxd starts a fresh executor\n",
                   message.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      _exit(4);
    }).detach();
  } catch (const std::system_error&) {
    _exit(4);  // no thread to wait on: end now (hrxd says it exited)
  }
}

bool ExecutorService::MoreRequestsWaiting() const {
  {
    absl::MutexLock lock(&requests_mu_);
    if (!requests_.empty()) return true;
  }
  int unread = 0;
  return ioctl(socket_, FIONREAD, &unread) == 0 && unread > 0;
}

void ExecutorService::SendProgress() {
  absl::flat_hash_map<uint64_t, QueueState*> dirty;
  {
    absl::MutexLock lock(&mu_);
    dirty.swap(dirty_);
  }
  // Two senders may race (the reporter and a completion); hrxd ignores a
  // Progress that does not move a queue forward.
  for (const auto& [queue_id, state] : dirty) {
    wire::Event event;
    event.mutable_progress()->set_queue(queue_id);
    event.mutable_progress()->set_completed(state->completed.load());
    writer_.Send(event);
  }
}

void ExecutorService::ReportProgress() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !dirty_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (dirty_.empty()) return;
    }
    SendProgress();
  }
}

}  // namespace hrx::executor
