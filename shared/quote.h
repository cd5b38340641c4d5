// Client-chosen text inside messages: quoted, control bytes escaped, and cut
// to a bounded length, so that a refusal can neither grow with a hostile
// request nor carry terminal escapes back to whoever prints it.
#ifndef HRX_SHARED_QUOTE_H_
#define HRX_SHARED_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"

namespace hrx::shared {

inline constexpr size_t kMaxQuotedBytes = 128;

// "name" with bytes below 0x20, 0x7f, '"' and '\' escaped; longer text is
// cut after kMaxQuotedBytes and says how long it was.
inline std::string QuoteForMessage(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxQuotedBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "\"";
  if (text.size() > kMaxQuotedBytes) {
    out += absl::StrFormat(" (cut; %u bytes in all)", text.size());
  }
  return out;
}

}  // namespace hrx::shared

#endif  // HRX_SHARED_QUOTE_H_
