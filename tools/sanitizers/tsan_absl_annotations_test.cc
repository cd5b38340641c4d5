// Checks the assumptions tsan_absl_annotations.cc makes about Abseil, and,
// under --config=tsan, that the interposition is in effect and that absl's
// Condition evaluation on another thread is not reported.

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

// The shim reads the mutex word and finds Notification::notified_yet_ at
// offset sizeof(intptr_t).
static_assert(sizeof(absl::Mutex) == sizeof(intptr_t));
static_assert(sizeof(absl::Notification) == 2 * sizeof(intptr_t));

intptr_t Word(absl::Mutex& mu) {
  return reinterpret_cast<std::atomic<intptr_t>*>(&mu)->load();
}

bool UnderTsan() {
  const char* s = std::getenv("HRX_SANITIZER");
  return s != nullptr && std::string(s) == "tsan";
}

TEST(TsanAbslAnnotations, MutexWordEncodesTheHeldMode) {
  absl::Mutex mu;
  mu.Lock();
  EXPECT_NE(Word(mu) & 0x8, 0);  // kMuWriter
  mu.Unlock();
  mu.ReaderLock();
  EXPECT_EQ(Word(mu) & 0x8, 0);
  EXPECT_NE(Word(mu) & 0x1, 0);  // kMuReader
  mu.ReaderUnlock();
  EXPECT_EQ(Word(mu), 0);
}

// The shim is linked only under --config=tsan (HRX_TSAN_SHIM): elsewhere
// there is nothing to bind to, and the test is not compiled rather than
// skipped.
#ifdef HRX_TSAN_SHIM
TEST(TsanAbslAnnotations, EveryCallerBindsToTheShim) {
  // Every function tsan_absl_annotations.cc defines.
  for (const char* sym : {
           "_ZN4absl7debian312Notification6NotifyEv",
           "_ZN4absl7debian315BlockingCounter14DecrementCountEv",
           "_ZN4absl7debian315BlockingCounter4WaitEv",
           "_ZN4absl7debian35Mutex10ReaderLockEv",
           "_ZN4absl7debian35Mutex12ReaderUnlockEv",
           "_ZN4absl7debian35Mutex13ReaderTryLockEv",
           "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE",
           "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_"
           "8DurationE",
           "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_"
           "4TimeE",
           "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_"
           "8DurationE",
           "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_"
           "4TimeE",
           "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_"
           "9ConditionENS0_8DurationE",
           "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_"
           "9ConditionENS0_4TimeE",
           "_ZN4absl7debian35Mutex4LockEv",
           "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE",
           "_ZN4absl7debian35Mutex6UnlockEv",
           "_ZN4absl7debian35Mutex7TryLockEv",
           "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE",
           "_ZN4absl7debian35MutexD1Ev",
           "_ZN4absl7debian35MutexD2Ev",
           "_ZN4absl7debian37Barrier5BlockEv",
           "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_"
           "8DurationE",
           "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE",
           "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE",
           "_ZNK4absl7debian312Notification19WaitForNotificationEv",
           "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0"
           "_8DurationE",
           "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS"
           "0_4TimeE",
       }) {
    // The global lookup scope is what PLT calls from libgrpc, libgpr and
    // libabsl_synchronization itself bind to.
    void* p = dlsym(RTLD_DEFAULT, sym);
    ASSERT_NE(p, nullptr) << sym;
    Dl_info info;
    ASSERT_NE(dladdr(p, &info), 0);
    EXPECT_EQ(std::string(info.dli_fname).find("libabsl"), std::string::npos)
        << sym << " resolves into " << info.dli_fname;
    EXPECT_NE(p, dlsym(RTLD_NEXT, sym)) << sym;
  }
}

// A worker pool in the shape of daemon/backend/cpu's ThreadPool: absl
// evaluates the waiters' conditions in Unlock() on the unlocking thread.
#endif  // HRX_TSAN_SHIM

TEST(TsanAbslAnnotations, ConditionsEvaluatedByTheUnlockerAreNotReported) {
  absl::Mutex mu;
  int queued = 0;  // guarded by mu
  int done = 0;    // guarded by mu
  bool stop = false;
  std::pair<int*, bool*> state(&queued, &stop);
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      for (;;) {
        mu.LockWhen(absl::Condition(
            +[](void* a) {
              auto* self = static_cast<std::pair<int*, bool*>*>(a);
              return *self->first > 0 || *self->second;
            },
            static_cast<void*>(&state)));
        if (queued == 0 && stop) {
          mu.Unlock();
          return;
        }
        --queued;
        ++done;
        mu.Unlock();
      }
    });
  }
  for (int i = 0; i < 1000; ++i) {
    absl::MutexLock l(&mu);
    ++queued;
  }
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d == 1000; }, &done));
    stop = true;
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(done, 1000);
}

TEST(TsanAbslAnnotations, CondVarReaderAwaitNotificationAndCounter) {
  absl::Mutex mu;
  absl::CondVar cv;
  int value = 0;  // guarded by mu
  std::thread writer([&] {
    absl::MutexLock l(&mu);
    value = 1;
    cv.SignalAll();
  });
  {
    absl::ReaderMutexLock l(&mu);
    while (value == 0) cv.WaitWithTimeout(&mu, absl::Milliseconds(10));
    EXPECT_TRUE(
        mu.AwaitWithTimeout(absl::Condition(
                                +[](int* v) { return *v == 1; }, &value),
                            absl::Seconds(1)));
  }
  writer.join();

  int payload = 0;
  absl::Notification n;
  std::thread t([&] {
    payload = 42;
    n.Notify();
  });
  while (!n.HasBeenNotified()) std::this_thread::yield();
  EXPECT_EQ(payload, 42);  // inline fast path: no report
  t.join();

  int parts[3] = {};
  absl::BlockingCounter bc(3);
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&, i] {
      parts[i] = i + 1;
      bc.DecrementCount();
    });
  }
  bc.Wait();
  EXPECT_EQ(parts[0] + parts[1] + parts[2], 6);
  for (auto& x : ts) x.join();
}

}  // namespace
