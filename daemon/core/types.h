// Core-side forms of requests and replies: decoded and shape-checked by the
// server layer, checked against live objects by Core.
#ifndef HRX_DAEMON_CORE_TYPES_H_
#define HRX_DAEMON_CORE_TYPES_H_

#include <cstdint>
#include <string>
#include <variant>

namespace hrx::daemon {

// Limits. Each is documented in docs/limits.md and tested at its edge.
inline constexpr uint64_t kMaxSessions = 1024;
inline constexpr size_t kMaxCommandsPerSubmit = 4096;
inline constexpr uint64_t kMaxInlineReadBytes = uint64_t{8} << 20;
inline constexpr size_t kMaxClientNameBytes = 128;

struct ViewRef {
  uint64_t buffer = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct FillCommand {
  ViewRef dst;
  uint8_t value = 0;
};

struct CopyCommand {
  ViewRef dst;
  ViewRef src;
};

struct UploadCommand {
  ViewRef dst;
  std::string data;
};

using Command = std::variant<FillCommand, CopyCommand, UploadCommand>;

struct BufferInfo {
  uint64_t handle = 0;
  uint64_t bytes = 0;
};

struct StreamInfo {
  uint64_t handle = 0;
  uint32_t queue = 0;
};

struct CloseSummary {
  uint64_t freed_buffers = 0;
  uint64_t freed_streams = 0;
};

struct DeviceInfo {
  std::string backend;
  std::string name;
  std::string target;
  uint64_t memory_bytes = 0;
  uint32_t queue_count = 0;
};

struct CoreStatus {
  DeviceInfo device;
  uint64_t uptime_seconds = 0;
  uint64_t sessions = 0;
  uint64_t streams = 0;
  uint64_t buffers = 0;
  uint64_t bytes_in_use = 0;
  uint64_t commands_submitted = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_TYPES_H_
