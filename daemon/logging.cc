#include "daemon/logging.h"

#include "absl/strings/str_format.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace hrx::daemon {

absl::Status InitLogging(const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only "off" itself may mean that.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad_log_level: --log-level=%s is not a level. Fix: use trace, debug, "
        "info, warn, error, critical or off.",
        level));
  }
  spdlog::set_level(parsed);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  return absl::OkStatus();
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = spdlog::stderr_color_mt(component);
  logger->set_level(spdlog::get_level());
  return logger;
}

}  // namespace hrx::daemon
