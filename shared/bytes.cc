#include "shared/bytes.h"

#include "absl/strings/str_format.h"

namespace hrx::shared {

std::string FormatBytes(uint64_t bytes) {
  if (bytes < kKiB) return absl::StrFormat("%u B", bytes);
  if (bytes < kMiB) return absl::StrFormat("%.2f KiB", bytes / double(kKiB));
  if (bytes < kGiB) return absl::StrFormat("%.2f MiB", bytes / double(kMiB));
  return absl::StrFormat("%.2f GiB", bytes / double(kGiB));
}

}  // namespace hrx::shared
