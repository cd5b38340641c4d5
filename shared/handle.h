// The wire form of a handle: an opaque 64-bit value naming a table entry by
// kind, slot and generation. Never a pointer. A freed slot's generation moves
// on, so an old handle never resolves to the object that reuses the slot.
#ifndef HRX_SHARED_HANDLE_H_
#define HRX_SHARED_HANDLE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "hrx/handle.h"

namespace hrx::shared {

enum class HandleKind : uint8_t {
  kInvalid = 0,
  kSession = 1,
  kBuffer = 2,
  kStream = 3,
  kKernel = 4,
  kGraphExec = 5,
};

std::string_view HandleKindName(HandleKind kind);

struct Handle {
  HandleKind kind = HandleKind::kInvalid;
  uint32_t slot = 0;
  uint32_t generation = 0;  // 24 bits on the wire; 0 is never issued

  static constexpr uint32_t kGenerationMask = (1u << 24) - 1;

  // Layout, most significant first: kind (8 bits), generation (24), slot (32).
  constexpr uint64_t Encode() const {
    return (uint64_t{static_cast<uint8_t>(kind)} << 56) |
           (uint64_t{generation & kGenerationMask} << 32) | slot;
  }
  static constexpr Handle Decode(uint64_t wire) {
    return Handle{static_cast<HandleKind>(wire >> 56),
                  static_cast<uint32_t>(wire & 0xffffffffu),
                  static_cast<uint32_t>((wire >> 32) & kGenerationMask)};
  }
  friend bool operator==(const Handle&, const Handle&) = default;
};

// An owner-branded handle as it crosses the wire: the object's encoding
// (Handle::Encode) plus the daemon run, the owning session and a tag that
// authenticates all three (see daemon/core/handle_authority.h). Defined with
// libhrx's public headers (client/include/hrx/handle.h), which hand it out.
using WireHandle = ::hrx::Handle;

// "instance.session.object.tag", each 16 lowercase hex digits: the form of
// the "hrx-session" metadata.
std::string FormatWireHandle(const WireHandle& handle);
// False when `text` is not in that form.
bool ParseWireHandle(std::string_view text, WireHandle* handle);

}  // namespace hrx::shared

#endif  // HRX_SHARED_HANDLE_H_
