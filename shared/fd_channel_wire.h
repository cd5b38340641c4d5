// The side channel's reply header (docs/resident-handles.md). The request is
// the 16-byte ticket alone.
#ifndef HRX_SHARED_FD_CHANNEL_WIRE_H_
#define HRX_SHARED_FD_CHANNEL_WIRE_H_

#include <cstdint>

namespace hrx::shared {

inline constexpr uint32_t kFdReplyMagic = 0x46585248;  // "HRXF", little-endian
inline constexpr uint32_t kTicketBytes = 16;
inline constexpr uint32_t kMaxFdReplyMessage = 4096;

struct FdReplyHeader {
  uint32_t magic;           // kFdReplyMagic
  int32_t code;             // canonical status code; 0: a descriptor follows
  uint32_t message_length;  // bytes of message after the header
  uint32_t reserved;
};

}  // namespace hrx::shared

#endif  // HRX_SHARED_FD_CHANNEL_WIRE_H_
