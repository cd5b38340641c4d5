// One spdlog logger per component ("daemon", "server", "core", "backend"),
// all writing to stderr with a shared level.
#ifndef HRX_DAEMON_LOGGING_H_
#define HRX_DAEMON_LOGGING_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "spdlog/logger.h"

namespace hrx::daemon {

// `level` is one of trace, debug, info, warn, error, critical, off.
// INVALID_ARGUMENT for anything else. Under systemd (JOURNAL_STREAM set)
// logs go to the journal with priorities; otherwise to stderr.
absl::Status InitLogging(const std::string& level);

// The named component logger, created on first use.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_LOGGING_H_
