// What every example does with a failed call: print the daemon's answer (its
// code, reason token and message, which ends with "Fix: ...") and exit.
#ifndef HRX_EXAMPLES_EXAMPLE_UTIL_H_
#define HRX_EXAMPLES_EXAMPLE_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hrx_examples {

inline void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  Check(value.status(), what);
  return *std::move(value);
}

}  // namespace hrx_examples

#endif  // HRX_EXAMPLES_EXAMPLE_UTIL_H_
