#include "shared/handle.h"

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
    case HandleKind::kInvalid:
      break;
  }
  return "invalid";
}

}  // namespace hrx::shared
