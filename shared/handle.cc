#include "shared/handle.h"

#include <cstdio>

namespace hrx::shared {

std::string_view HandleKindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kSession:
      return "session";
    case HandleKind::kBuffer:
      return "buffer";
    case HandleKind::kStream:
      return "stream";
    case HandleKind::kKernel:
      return "kernel";
    case HandleKind::kGraphExec:
      return "graph exec";
    case HandleKind::kInvalid:
      break;
  }
  return "invalid";
}

std::string FormatWireHandle(const WireHandle& handle) {
  char text[4 * 17];
  std::snprintf(text, sizeof(text), "%016llx.%016llx.%016llx.%016llx",
                static_cast<unsigned long long>(handle.instance),
                static_cast<unsigned long long>(handle.session),
                static_cast<unsigned long long>(handle.object),
                static_cast<unsigned long long>(handle.tag));
  return text;
}

bool ParseWireHandle(std::string_view text, WireHandle* handle) {
  if (text.size() != 4 * 16 + 3) return false;
  uint64_t fields[4];
  for (int f = 0; f < 4; ++f) {
    const std::string_view part = text.substr(f * 17, 16);
    if (f < 3 && text[f * 17 + 16] != '.') return false;
    uint64_t value = 0;
    for (char c : part) {
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else {
        return false;
      }
      value = (value << 4) | static_cast<uint64_t>(digit);
    }
    fields[f] = value;
  }
  *handle = WireHandle{fields[0], fields[1], fields[2], fields[3]};
  return true;
}

}  // namespace hrx::shared
