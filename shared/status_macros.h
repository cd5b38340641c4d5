// Status plumbing that Debian 12's Abseil (20220623) lacks: early-return
// macros and an invariant check. Thread-compatible; header-only.
#ifndef HRX_SHARED_STATUS_MACROS_H_
#define HRX_SHARED_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HRX_INTERNAL_CONCAT_IMPL(a, b) a##b
#define HRX_INTERNAL_CONCAT(a, b) HRX_INTERNAL_CONCAT_IMPL(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define HRX_RETURN_IF_ERROR(expr)                \
  do {                                           \
    ::absl::Status hrx_status_internal = (expr); \
    if (!hrx_status_internal.ok()) {             \
      return hrx_status_internal;                \
    }                                            \
  } while (false)

// `HRX_ASSIGN_OR_RETURN(auto x, F());` binds the value of a StatusOr or
// returns its status from the enclosing function.
#define HRX_ASSIGN_OR_RETURN(lhs, expr)                                       \
  HRX_INTERNAL_ASSIGN_OR_RETURN(HRX_INTERNAL_CONCAT(hrx_statusor_, __LINE__), \
                                lhs, expr)
#define HRX_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) {                                    \
    return std::move(tmp).status();                   \
  }                                                   \
  lhs = *std::move(tmp)

// A broken internal invariant (never bad client input): report and abort so
// the service manager restarts the daemon with clean state.
#define HRX_CHECK(cond)                                               \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: HRX_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                  \
      std::abort();                                                   \
    }                                                                 \
  } while (false)

#endif  // HRX_SHARED_STATUS_MACROS_H_
