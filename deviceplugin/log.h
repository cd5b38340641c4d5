// The plugin's log: one timestamped line on stderr each (the DaemonSet's
// container log).
#ifndef HRX_DEVICEPLUGIN_LOG_H_
#define HRX_DEVICEPLUGIN_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hrx::deviceplugin {

inline void Log(const std::string& line) {
  absl::FPrintF(stderr, "%s hrx-device-plugin: %s\n",
                absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                 absl::UTCTimeZone()),
                line);
}

}  // namespace hrx::deviceplugin

#endif  // HRX_DEVICEPLUGIN_LOG_H_
