// Helpers the benchmarks share: the median of many timed rounds, and
// --name=value flags.
#ifndef HRX_TESTS_BENCHMARKS_MEDIAN_H_
#define HRX_TESTS_BENCHMARKS_MEDIAN_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"

namespace hrx::bench {

// The median of `rounds` timings of `step`, in microseconds; a tenth more
// rounds run first to warm up and are not counted.
inline absl::StatusOr<double> MedianMicros(
    int rounds, const std::function<absl::Status()>& step) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> micros;
  micros.reserve(rounds);
  for (int i = 0; i < rounds + rounds / 10; ++i) {
    const auto start = Clock::now();
    if (absl::Status status = step(); !status.ok()) return status;
    const double took =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= rounds / 10) micros.push_back(took);
  }
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2,
                   micros.end());
  return micros[micros.size() / 2];
}

// The value of --`name`=VALUE in argv, or `fallback`.
inline std::string FlagText(int argc, char** argv, const std::string& name,
                            const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return fallback;
}

// As FlagText, for an unsigned number (`fallback` when absent or not one).
inline uint64_t FlagValue(int argc, char** argv, const std::string& name,
                          uint64_t fallback) {
  uint64_t value = 0;
  return absl::SimpleAtoi(FlagText(argc, argv, name, ""), &value) ? value
                                                                  : fallback;
}

}  // namespace hrx::bench

#endif  // HRX_TESTS_BENCHMARKS_MEDIAN_H_
