// Overflow-safe range checks shared by the client (early refusal) and the
// daemon (the authority: it never trusts the client's check).
#ifndef HRX_SHARED_SPAN_CHECK_H_
#define HRX_SHARED_SPAN_CHECK_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace hrx::shared {

// OK when [offset, offset + length) lies within [0, capacity), computed
// without wrapping. Otherwise INVALID_ARGUMENT with reason token
// "view_out_of_range" naming all three numbers; `what` names the operation
// ("fill dst").
absl::Status CheckSpan(std::string_view what, uint64_t offset, uint64_t length,
                       uint64_t capacity);

// True when the half-open ranges [a, a + length) and [b, b + length) share a
// byte. Callers have checked both spans, so the sums cannot wrap.
bool SpansOverlap(uint64_t a, uint64_t b, uint64_t length);

}  // namespace hrx::shared

#endif  // HRX_SHARED_SPAN_CHECK_H_
