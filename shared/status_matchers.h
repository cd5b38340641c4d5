// Test matchers: EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound,
// HasSubstr("stale_handle"))). Works on absl::Status and absl::StatusOr<T>.
#ifndef HRX_SHARED_STATUS_MATCHERS_H_
#define HRX_SHARED_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace hrx::shared {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = ::hrx::shared::GetStatus(arg);
  *result_listener << "which is " << status.ToString();
  return status.code() == code &&
         ::testing::ExplainMatchResult(
             message_matcher, std::string(status.message()), result_listener);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = ::hrx::shared::GetStatus(arg);
  *result_listener << "which is " << status.ToString();
  return status.ok();
}

}  // namespace hrx::shared

#endif  // HRX_SHARED_STATUS_MATCHERS_H_
