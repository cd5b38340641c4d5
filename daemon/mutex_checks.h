// Abseil's lock-order checking, chosen per process. Debian's Abseil is
// built without NDEBUG, so its debug-mode deadlock detection is on in every
// process that links it: each Mutex::Lock also updates a process-wide graph
// of lock orders under one global lock, and a cycle (a potential deadlock,
// even one that never happens) aborts the process. hrxd and its executors
// must not die for a latent lock order, and that graph costs batched
// commands about a quarter of their time (docs/performance.md), so the
// daemon's processes turn it off; the test suite turns it on again
// (kMutexChecksVariable) to find such orders.
#ifndef HRX_DAEMON_MUTEX_CHECKS_H_
#define HRX_DAEMON_MUTEX_CHECKS_H_

namespace hrx::daemon {

// Set to "1" in hrxd's environment (its executors inherit it): Abseil's
// lock-order checking stays on, and a cycle aborts with both stacks.
inline constexpr char kMutexChecksVariable[] = "HRX_MUTEX_DEADLOCK_DETECTION";

// Call first in main, before any thread starts.
void ConfigureMutexChecks();

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_MUTEX_CHECKS_H_
