// Every message hrxd sends to its service manager (sd_notify), in one place:
// READY=1 once the listeners are bound and the backend is open, STATUS=
// lines that say what the daemon is doing, WATCHDOG=1 from the main loop
// (never from a free-running thread), STOPPING=1 and RELOADING=1. Without
// NOTIFY_SOCKET (not under systemd) every call does nothing.
#ifndef HRX_DAEMON_NOTIFY_H_
#define HRX_DAEMON_NOTIFY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace hrx::daemon {

class Notifier {
 public:
  void Ready(const std::string& status);
  void Status(const std::string& status);
  void Watchdog();
  void Reloading();
  void ReloadDone(const std::string& status);
  void Stopping(const std::string& status);
  // The watchdog interval the service manager asks for (WatchdogSec=), if
  // any; the main loop pings at half of it.
  static std::optional<absl::Duration> WatchdogInterval();
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_NOTIFY_H_
