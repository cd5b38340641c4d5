#include "daemon/notify.h"

#include <systemd/sd-daemon.h>

namespace hrx::daemon {
namespace {

void Send(const std::string& message) {
  (void)sd_notify(/*unset_environment=*/0, message.c_str());
}

}  // namespace

void Notifier::Ready(const std::string& status) {
  Send("READY=1\nSTATUS=" + status);
}

void Notifier::Status(const std::string& status) { Send("STATUS=" + status); }

void Notifier::Watchdog() { Send("WATCHDOG=1"); }

void Notifier::Reloading() { Send("RELOADING=1\nSTATUS=reloading the config"); }

void Notifier::ReloadDone(const std::string& status) {
  Send("READY=1\nSTATUS=" + status);
}

void Notifier::Stopping(const std::string& status) {
  Send("STOPPING=1\nSTATUS=" + status);
}

std::optional<absl::Duration> Notifier::WatchdogInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0 && usec > 0) {
    return absl::Microseconds(static_cast<int64_t>(usec));
  }
  return std::nullopt;
}

}  // namespace hrx::daemon
