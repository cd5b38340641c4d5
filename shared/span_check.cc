#include "shared/span_check.h"

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::shared {

absl::Status CheckSpan(std::string_view what, uint64_t offset, uint64_t length,
                       uint64_t capacity) {
  // offset <= capacity && length <= capacity - offset cannot wrap, unlike
  // offset + length <= capacity.
  if (offset <= capacity && length <= capacity - offset) {
    return absl::OkStatus();
  }
  return Refusal(
      Reason::kViewOutOfRange,
      absl::StrFormat(
          "%s: span offset %u + length %u exceeds the buffer's "
          "%u bytes. Fix: keep offset + length within the buffer's size.",
          what, offset, length, capacity));
}

bool SpansOverlap(uint64_t a, uint64_t b, uint64_t length) {
  if (length == 0) return false;
  return a < b + length && b < a + length;
}

}  // namespace hrx::shared
