// Shared by the test client programs (tenant_client, attacker): their
// --name=value flags, and the "key: value" lines the tests read back.
#ifndef HRX_TESTS_PROGRAM_IO_H_
#define HRX_TESTS_PROGRAM_IO_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hrx::testing {

// The value of --name=VALUE, or "".
inline std::string Flag(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return "";
}

// --name as a decimal (else hexadecimal) number, or `fallback`.
inline uint64_t Number(int argc, char** argv, const std::string& name,
                       uint64_t fallback) {
  uint64_t value = 0;
  const std::string text = Flag(argc, argv, name);
  if (!text.empty() && absl::SimpleAtoi(text, &value)) return value;
  if (!text.empty() && absl::SimpleHexAtoi(text, &value)) return value;
  return fallback;
}

// Prints "key: value" and flushes (tests poll the output while we run).
inline void Say(const std::string& key, const std::string& value) {
  std::printf("%s: %s\n", key.c_str(), value.c_str());
  std::fflush(stdout);
}

// "OK", or "CODE message".
inline std::string StatusText(const absl::Status& status) {
  return status.ok() ? "OK"
                     : absl::StrCat(absl::StatusCodeToString(status.code()),
                                    " ", status.message());
}

}  // namespace hrx::testing

#endif  // HRX_TESTS_PROGRAM_IO_H_
