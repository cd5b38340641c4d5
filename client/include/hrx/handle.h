// The owner-branded handle as libhrx hands it out and the daemon receives it:
// the object's encoding plus the daemon run, the owning session and a tag
// that authenticates all three. Opaque to clients: pass it back unchanged.
// A plain value with no dependencies, so hrxd and libhrx share one type.
#ifndef HRX_CLIENT_INCLUDE_HRX_HANDLE_H_
#define HRX_CLIENT_INCLUDE_HRX_HANDLE_H_

#include <cstdint>

namespace hrx {

struct Handle {
  uint64_t instance = 0;  // the daemon run that issued it
  uint64_t session = 0;   // the owning session
  uint64_t object = 0;    // kind, generation and slot
  uint64_t tag = 0;       // authenticates the three above
  friend bool operator==(const Handle&, const Handle&) = default;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_HANDLE_H_
