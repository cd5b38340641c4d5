// Human-readable byte counts for messages and tables ("64.00 MiB").
#ifndef HRX_SHARED_BYTES_H_
#define HRX_SHARED_BYTES_H_

#include <cstdint>
#include <string>

namespace hrx::shared {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// "512 B", "4.00 KiB", "1.06 GiB"; exact byte counts below 1 KiB.
std::string FormatBytes(uint64_t bytes);

}  // namespace hrx::shared

#endif  // HRX_SHARED_BYTES_H_
