#include "daemon/logging.h"

#include <cstdlib>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/systemd_sink.h"
#include "spdlog/spdlog.h"

namespace hrx::daemon {

absl::Status InitLogging(const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only "off" itself may mean that.
  if (parsed == spdlog::level::off && level != "off") {
    return Refusal(
        Reason::kBadLogLevel,
        absl::StrFormat("--log-level=%s is not a level. Fix: use trace, debug, "
                        "info, warn, error, critical or off.",
                        level));
  }
  spdlog::set_level(parsed);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  return absl::OkStatus();
}

namespace {

spdlog::sink_ptr& Sink() {
  static spdlog::sink_ptr sink;
  return sink;
}

}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  if (Sink() == nullptr) {
    const char* journal = std::getenv("JOURNAL_STREAM");
    if (journal != nullptr && journal[0] != '\0') {
      Sink() = std::make_shared<spdlog::sinks::systemd_sink_mt>("hrxd");
    } else {
      Sink() = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    }
  }
  auto logger = std::make_shared<spdlog::logger>(component, Sink());
  // Registers it with the level and pattern InitLogging set.
  spdlog::initialize_logger(logger);
  return logger;
}

}  // namespace hrx::daemon
