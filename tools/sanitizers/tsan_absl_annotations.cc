// ThreadSanitizer annotations for the system Abseil's synchronization
// primitives (linked only under --config=tsan; see tools/sanitizers/BUILD).
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so
// TSan sees neither the happens-before edges absl::Mutex creates nor that
// absl evaluates absl::Condition functions (project code) inside its own slow
// paths, possibly on the unlocking thread on behalf of a waiter.  That yields
// false data races everywhere absl::Mutex is used, including inside libgrpc.
//
// This file interposes the exported member functions by their mangled names.
// Every binary defines them and exports them dynamically (every shared
// library in the link, libabsl_synchronization itself included, calls them
// through the PLT: R_X86_64_JUMP_SLOT relocations, no -Bsymbolic), so the
// dynamic linker binds all callers here; each wrapper calls the real function
// found with dlsym(RTLD_NEXT) inside the TSan mutex annotations that absl
// itself would issue if it were instrumented:
//   __tsan_mutex_pre_lock/post_lock     around Lock, ReaderLock, TryLock, ...
//   __tsan_mutex_pre_unlock/post_unlock around Unlock, ReaderUnlock
//   unlock + relock                     around Await*, CondVar::Wait*
// Between pre_* and post_* TSan ignores memory accesses and synchronization
// of the calling thread, so Condition functions absl runs there are not
// reported.  The annotations give real mutex semantics (reader/writer mode,
// the held-mutex set in reports, lock-order-inversion detection).
// absl::Notification, BlockingCounter and Barrier get release/acquire edges.
//
// Calls made while another wrapper is active on the same thread (absl calls
// some of these functions itself, e.g. LockWhenWithTimeout ->
// LockWhenWithDeadline, Notification::Notify -> Mutex::Lock) pass straight
// through, so each user-level operation is annotated exactly once.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/base/options.h"
#include "absl/time/time.h"

// Exported by libtsan, not declared in GCC 12's <sanitizer/tsan_interface.h>.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

#define HRX_STR2(x) #x
#define HRX_STR(x) HRX_STR2(x)

namespace {

constexpr bool StrEq(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || StrEq(a + 1, b + 1));
}
// The mangled names below spell absl's inline namespace.
static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1 &&
                  StrEq(HRX_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME), "debian3"),
              "update the mangled names for this Abseil build");

// absl::Mutex is one std::atomic<intptr_t>; kMuWriter (mutex.cc) is set while
// it is held exclusively, kMuReader while it is held shared.
// tsan_absl_annotations_test checks both.
constexpr intptr_t kMuWriter = 0x0008;

thread_local int depth = 0;

struct Scope {
  const bool outer;
  Scope() : outer(depth++ == 0) {}
  ~Scope() { --depth; }
};

void* Resolve(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) {
    std::fprintf(stderr, "tsan_absl_annotations: dlsym(RTLD_NEXT, %s): %s\n",
                 name, dlerror());
    std::abort();
  }
  return p;
}

// Looks the real function up once (threads racing here store the same value).
#define REAL(type, sym)                                \
  static std::atomic<void*> real_ptr{nullptr};         \
  void* rp = real_ptr.load(std::memory_order_acquire); \
  if (rp == nullptr) {                                 \
    rp = Resolve(sym);                                 \
    real_ptr.store(rp, std::memory_order_release);     \
  }                                                    \
  auto real = reinterpret_cast<type>(rp)

// __tsan_mutex_* also record an access to the mutex's own memory (the lock
// word).  absl::Mutex members of objects that gRPC allocates, publishes and
// frees through its own uninstrumented atomics (refcounts, lock-free queues)
// would then be reported as racing with operator new/delete.  Those accesses
// are ignored; the synchronization the annotations carry is not (TSan keeps
// ignoring accesses and ignoring synchronization apart).
struct NoAccess {
  NoAccess() { __tsan_ignore_thread_begin(); }
  ~NoAccess() { __tsan_ignore_thread_end(); }
};

unsigned HeldMode(void* mu) {
  NoAccess n;  // see above
  intptr_t v = reinterpret_cast<std::atomic<intptr_t>*>(mu)->load(
      std::memory_order_relaxed);
  return (v & kMuWriter) != 0 ? 0 : __tsan_mutex_read_lock;
}

void PreLock(void* mu, unsigned f) {
  NoAccess n;
  __tsan_mutex_pre_lock(mu, f);
}
void PostLock(void* mu, unsigned f) {
  NoAccess n;
  __tsan_mutex_post_lock(mu, f, 0);
}
void PreUnlock(void* mu, unsigned f) {
  NoAccess n;
  __tsan_mutex_pre_unlock(mu, f);
}
void PostUnlock(void* mu, unsigned f) {
  NoAccess n;
  __tsan_mutex_post_unlock(mu, f);
}
void Destroy(void* mu) {
  NoAccess n;
  __tsan_mutex_destroy(mu, 0);
}

}  // namespace

#define NS "_ZN4absl7debian3"
#define MU NS "5Mutex"
#define CV NS "7CondVar"
#define COND "ERKNS0_9ConditionE"
#define DUR "NS0_8DurationE"
#define TIME "NS0_4TimeE"

using Mutex = void;      // absl::Mutex*, as the implicit `this`
using Condition = void;  // const absl::Condition&

// ---- plain lock / unlock -------------------------------------------------

#define LOCK_WRAPPER(fn, sym, flags)          \
  extern "C" void fn(Mutex* mu) __asm__(sym); \
  extern "C" void fn(Mutex* mu) {             \
    REAL(void (*)(Mutex*), sym);              \
    Scope s;                                  \
    if (!s.outer) return real(mu);            \
    PreLock(mu, flags);                       \
    real(mu);                                 \
    PostLock(mu, flags);                      \
  }

#define UNLOCK_WRAPPER(fn, sym, flags)        \
  extern "C" void fn(Mutex* mu) __asm__(sym); \
  extern "C" void fn(Mutex* mu) {             \
    REAL(void (*)(Mutex*), sym);              \
    Scope s;                                  \
    if (!s.outer) return real(mu);            \
    PreUnlock(mu, flags);                     \
    real(mu);                                 \
    PostUnlock(mu, flags);                    \
  }

#define TRYLOCK_WRAPPER(fn, sym, flags)                        \
  extern "C" bool fn(Mutex* mu) __asm__(sym);                  \
  extern "C" bool fn(Mutex* mu) {                              \
    REAL(bool (*)(Mutex*), sym);                               \
    Scope s;                                                   \
    if (!s.outer) return real(mu);                             \
    PreLock(mu, (flags) | __tsan_mutex_try_lock);              \
    bool ok = real(mu);                                        \
    PostLock(mu, (flags) | __tsan_mutex_try_lock |             \
                     (ok ? 0 : __tsan_mutex_try_lock_failed)); \
    return ok;                                                 \
  }

LOCK_WRAPPER(hrx_tsan_Lock, MU "4LockEv", 0)
LOCK_WRAPPER(hrx_tsan_ReaderLock, MU "10ReaderLockEv", __tsan_mutex_read_lock)
UNLOCK_WRAPPER(hrx_tsan_Unlock, MU "6UnlockEv", 0)
UNLOCK_WRAPPER(hrx_tsan_ReaderUnlock, MU "12ReaderUnlockEv",
               __tsan_mutex_read_lock)
TRYLOCK_WRAPPER(hrx_tsan_TryLock, MU "7TryLockEv", 0)
TRYLOCK_WRAPPER(hrx_tsan_ReaderTryLock, MU "13ReaderTryLockEv",
                __tsan_mutex_read_lock)

// ---- LockWhen*: blocks until the condition holds, returns with mu held ---

extern "C" void hrx_tsan_LockWhen(Mutex*,
                                  const Condition*) __asm__(MU
                                                            "8LockWhen" COND);
extern "C" void hrx_tsan_LockWhen(Mutex* mu, const Condition* c) {
  REAL(void (*)(Mutex*, const Condition*), MU "8LockWhen" COND);
  Scope s;
  if (!s.outer) return real(mu, c);
  PreLock(mu, 0);
  real(mu, c);
  PostLock(mu, 0);
}

extern "C" void hrx_tsan_ReaderLockWhen(Mutex*, const Condition*) __asm__(
    MU "14ReaderLockWhen" COND);
extern "C" void hrx_tsan_ReaderLockWhen(Mutex* mu, const Condition* c) {
  REAL(void (*)(Mutex*, const Condition*), MU "14ReaderLockWhen" COND);
  Scope s;
  if (!s.outer) return real(mu, c);
  PreLock(mu, __tsan_mutex_read_lock);
  real(mu, c);
  PostLock(mu, __tsan_mutex_read_lock);
}

#define TIMED_LOCKWHEN(fn, sym, flags, T)                       \
  extern "C" bool fn(Mutex*, const Condition*, T) __asm__(sym); \
  extern "C" bool fn(Mutex* mu, const Condition* c, T t) {      \
    REAL(bool (*)(Mutex*, const Condition*, T), sym);           \
    Scope s;                                                    \
    if (!s.outer) return real(mu, c, t);                        \
    PreLock(mu, flags);                                         \
    bool r = real(mu, c, t); /* mu is held whatever r says */   \
    PostLock(mu, flags);                                        \
    return r;                                                   \
  }

TIMED_LOCKWHEN(hrx_tsan_LockWhenWithTimeout,
               MU "19LockWhenWithTimeout" COND DUR, 0, absl::Duration)
TIMED_LOCKWHEN(hrx_tsan_LockWhenWithDeadline,
               MU "20LockWhenWithDeadline" COND TIME, 0, absl::Time)
TIMED_LOCKWHEN(hrx_tsan_ReaderLockWhenWithTimeout,
               MU "25ReaderLockWhenWithTimeout" COND DUR,
               __tsan_mutex_read_lock, absl::Duration)
TIMED_LOCKWHEN(hrx_tsan_ReaderLockWhenWithDeadline,
               MU "26ReaderLockWhenWithDeadline" COND TIME,
               __tsan_mutex_read_lock, absl::Time)

// ---- Await*: mu held (either mode) on entry and on return; released while
// waiting.  Annotated as unlock before the real call and lock after it. ----

#define RELOCK_BEGIN(mu, mode)  \
  unsigned mode = HeldMode(mu); \
  PreUnlock(mu, mode);
#define RELOCK_END(mu, mode) \
  PostUnlock(mu, mode);      \
  PreLock(mu, mode);         \
  PostLock(mu, mode);

extern "C" void hrx_tsan_Await(Mutex*,
                               const Condition*) __asm__(MU "5Await" COND);
extern "C" void hrx_tsan_Await(Mutex* mu, const Condition* c) {
  REAL(void (*)(Mutex*, const Condition*), MU "5Await" COND);
  Scope s;
  if (!s.outer) return real(mu, c);
  RELOCK_BEGIN(mu, mode)
  real(mu, c);
  RELOCK_END(mu, mode)
}

#define TIMED_AWAIT(fn, sym, T)                                 \
  extern "C" bool fn(Mutex*, const Condition*, T) __asm__(sym); \
  extern "C" bool fn(Mutex* mu, const Condition* c, T t) {      \
    REAL(bool (*)(Mutex*, const Condition*, T), sym);           \
    Scope s;                                                    \
    if (!s.outer) return real(mu, c, t);                        \
    RELOCK_BEGIN(mu, mode)                                      \
    bool r = real(mu, c, t);                                    \
    RELOCK_END(mu, mode)                                        \
    return r;                                                   \
  }

TIMED_AWAIT(hrx_tsan_AwaitWithTimeout, MU "16AwaitWithTimeout" COND DUR,
            absl::Duration)
TIMED_AWAIT(hrx_tsan_AwaitWithDeadline, MU "17AwaitWithDeadline" COND TIME,
            absl::Time)

// ---- CondVar::Wait*(mu): same shape as Await, on the CondVar's mutex. ----

using CondVar = void;

extern "C" void hrx_tsan_CvWait(CondVar*,
                                Mutex*) __asm__(CV "4WaitEPNS0_5MutexE");
extern "C" void hrx_tsan_CvWait(CondVar* cv, Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), CV "4WaitEPNS0_5MutexE");
  Scope s;
  if (!s.outer) return real(cv, mu);
  RELOCK_BEGIN(mu, mode)
  real(cv, mu);
  RELOCK_END(mu, mode)
}

#define TIMED_CVWAIT(fn, sym, T)                        \
  extern "C" bool fn(CondVar*, Mutex*, T) __asm__(sym); \
  extern "C" bool fn(CondVar* cv, Mutex* mu, T t) {     \
    REAL(bool (*)(CondVar*, Mutex*, T), sym);           \
    Scope s;                                            \
    if (!s.outer) return real(cv, mu, t);               \
    RELOCK_BEGIN(mu, mode)                              \
    bool r = real(cv, mu, t);                           \
    RELOCK_END(mu, mode)                                \
    return r;                                           \
  }

TIMED_CVWAIT(hrx_tsan_CvWaitWithTimeout,
             CV "15WaitWithTimeoutEPNS0_5MutexE" DUR, absl::Duration)
TIMED_CVWAIT(hrx_tsan_CvWaitWithDeadline,
             CV "16WaitWithDeadlineEPNS0_5MutexE" TIME, absl::Time)

// ---- ~Mutex: forget TSan's state for the address (stack reuse). ---------

#define DTOR_WRAPPER(fn, sym)                 \
  extern "C" void fn(Mutex* mu) __asm__(sym); \
  extern "C" void fn(Mutex* mu) {             \
    REAL(void (*)(Mutex*), sym);              \
    Scope s;                                  \
    if (s.outer) Destroy(mu);                 \
    real(mu);                                 \
  }
DTOR_WRAPPER(hrx_tsan_MutexD1, MU "D1Ev")
DTOR_WRAPPER(hrx_tsan_MutexD2, MU "D2Ev")

// ---- absl::Notification {Mutex mutex_; std::atomic<bool> notified_yet_;}.
// The edge is put on &notified_yet_, which is also what the inline
// HasBeenNotified() loads with memory_order_acquire in instrumented code, so
// that fast path synchronizes with Notify() too. ----------------------------

namespace {
void* NotifiedYet(const void* n) {
  return const_cast<char*>(static_cast<const char*>(n)) + sizeof(intptr_t);
}
}  // namespace

#define NOTIF NS "12Notification"
#define NOTIFK "_ZNK4absl7debian312Notification"

extern "C" void hrx_tsan_Notify(void*) __asm__(NOTIF "6NotifyEv");
extern "C" void hrx_tsan_Notify(void* n) {
  REAL(void (*)(void*), NOTIF "6NotifyEv");
  Scope s;
  if (!s.outer) return real(n);
  __tsan_release(NotifiedYet(n));
  __tsan_ignore_thread_begin();
  real(n);
  __tsan_ignore_thread_end();
}

extern "C" void hrx_tsan_WaitForNotification(const void*) __asm__(
    NOTIFK "19WaitForNotificationEv");
extern "C" void hrx_tsan_WaitForNotification(const void* n) {
  REAL(void (*)(const void*), NOTIFK "19WaitForNotificationEv");
  Scope s;
  if (!s.outer) return real(n);
  __tsan_ignore_thread_begin();
  real(n);
  __tsan_ignore_thread_end();
  __tsan_acquire(NotifiedYet(n));
}

#define TIMED_NOTIF_WAIT(fn, sym, T)               \
  extern "C" bool fn(const void*, T) __asm__(sym); \
  extern "C" bool fn(const void* n, T t) {         \
    REAL(bool (*)(const void*, T), sym);           \
    Scope s;                                       \
    if (!s.outer) return real(n, t);               \
    __tsan_ignore_thread_begin();                  \
    bool r = real(n, t);                           \
    __tsan_ignore_thread_end();                    \
    if (r) __tsan_acquire(NotifiedYet(n));         \
    return r;                                      \
  }

TIMED_NOTIF_WAIT(hrx_tsan_WaitForNotificationWithTimeout,
                 NOTIFK "30WaitForNotificationWithTimeoutENS0_8DurationE",
                 absl::Duration)
TIMED_NOTIF_WAIT(hrx_tsan_WaitForNotificationWithDeadline,
                 NOTIFK "31WaitForNotificationWithDeadlineENS0_4TimeE",
                 absl::Time)

// ---- absl::BlockingCounter / absl::Barrier: release on arrival, acquire
// when released. -----------------------------------------------------------

extern "C" bool hrx_tsan_DecrementCount(void*) __asm__(
    NS "15BlockingCounter14DecrementCountEv");
extern "C" bool hrx_tsan_DecrementCount(void* bc) {
  REAL(bool (*)(void*), NS "15BlockingCounter14DecrementCountEv");
  Scope s;
  if (!s.outer) return real(bc);
  __tsan_release(bc);
  __tsan_ignore_thread_begin();
  bool r = real(bc);
  __tsan_ignore_thread_end();
  return r;
}

extern "C" void hrx_tsan_BlockingCounterWait(void*) __asm__(
    NS "15BlockingCounter4WaitEv");
extern "C" void hrx_tsan_BlockingCounterWait(void* bc) {
  REAL(void (*)(void*), NS "15BlockingCounter4WaitEv");
  Scope s;
  if (!s.outer) return real(bc);
  __tsan_ignore_thread_begin();
  real(bc);
  __tsan_ignore_thread_end();
  __tsan_acquire(bc);
}

extern "C" bool hrx_tsan_BarrierBlock(void*) __asm__(NS "7Barrier5BlockEv");
extern "C" bool hrx_tsan_BarrierBlock(void* b) {
  REAL(bool (*)(void*), NS "7Barrier5BlockEv");
  Scope s;
  if (!s.outer) return real(b);
  __tsan_release(b);
  __tsan_ignore_thread_begin();
  bool r = real(b);
  __tsan_ignore_thread_end();
  __tsan_acquire(b);
  return r;
}

// ---- Default TSan flags for every binary this is linked into (children that
// tests spawn included); TSAN_OPTIONS still overrides them. ----------------
//
// ignore_noninstrumented_modules=1: interceptors (sendmsg, recvmsg, memcpy,
// operator new/delete, ...) called directly from libraries not built with
// -fsanitize=thread (libgrpc, libgpr, libprotobuf, libabsl_*, libstdc++)
// record no memory accesses. gRPC hands buffers and objects between its
// threads through lock-free code TSan cannot see (combiners, closures, the
// completion queue, refcounts), so every message it sends or frees would
// otherwise be reported. Synchronization done by those interceptors
// (pthread_create, pthread_mutex_*, ...) is still tracked.
extern "C" __attribute__((visibility("default"), used)) const char*
__tsan_default_options() {
  return "ignore_noninstrumented_modules=1";
}
