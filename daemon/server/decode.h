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
#include "daemon/backend/backend.h"
#include "hrx/v1/kernel.pb.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// The session handle from the call's "hrx-session" metadata.
// UNAUTHENTICATED when absent or not a decimal number.
absl::StatusOr<uint64_t> DecodeSession(const grpc::ServerContextBase& context);

ViewRef DecodeView(const hrx::v1::View& view);

// INVALID_ARGUMENT for a fill value above 255, a dispatch whose grid or
// block does not have 3 entries or whose constants pass 256 bytes, or a
// command with no op set; the message names the command's position.
absl::StatusOr<std::vector<Command>> DecodeCommands(
    const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands);

// INVALID_ARGUMENT "bad_signature" for an unknown kind, a scalar that is not
// 4 or 8 bytes, or a workgroup size without 3 entries.
absl::StatusOr<backend::KernelSignature> DecodeSignature(
    const hrx::v1::KernelSignature& signature);
void EncodeSignature(const backend::KernelSignature& signature,
                     hrx::v1::KernelSignature* out);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_DECODE_H_
