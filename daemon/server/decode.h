// Wire to core: one Decode function per message. All shape validation of
// wire input (ranges of enums and small fields, the session metadata) lives
// here; checks against live objects live in daemon/core.
#ifndef HRX_DAEMON_SERVER_DECODE_H_
#define HRX_DAEMON_SERVER_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/types.h"
#include "grpcpp/server_context.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// The session handle from the call's "hrx-session" metadata.
// UNAUTHENTICATED when absent or not a decimal number.
absl::StatusOr<uint64_t> DecodeSession(const grpc::ServerContextBase& context);

ViewRef DecodeView(const hrx::v1::View& view);

// INVALID_ARGUMENT for a fill value above 255 or a command with no op set.
absl::StatusOr<std::vector<Command>> DecodeSubmit(
    const hrx::v1::SubmitRequest& request);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_DECODE_H_
