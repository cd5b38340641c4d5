#include "daemon/server/decode.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "shared/socket_path.h"

namespace hrx::daemon {

absl::StatusOr<uint64_t> DecodeSession(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(shared::kSessionMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "no_session: the call carries no \"%s\" metadata. Fix: call "
        "hrx.v1.Sessions/OpenSession and send its session handle as \"%s\" "
        "metadata on every call.",
        shared::kSessionMetadataKey, shared::kSessionMetadataKey));
  }
  const std::string text(it->second.data(), it->second.size());
  uint64_t session = 0;
  if (!absl::SimpleAtoi(text, &session)) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "bad_session_metadata: \"%s\" metadata \"%s\" is not a decimal session "
        "handle. Fix: send the session handle from OpenSession in decimal.",
        shared::kSessionMetadataKey, text));
  }
  return session;
}

ViewRef DecodeView(const hrx::v1::View& view) {
  return ViewRef{view.buffer(), view.offset(), view.length()};
}

absl::StatusOr<std::vector<Command>> DecodeSubmit(
    const hrx::v1::SubmitRequest& request) {
  std::vector<Command> commands;
  commands.reserve(request.commands_size());
  for (int i = 0; i < request.commands_size(); ++i) {
    const hrx::v1::Command& command = request.commands(i);
    switch (command.op_case()) {
      case hrx::v1::Command::kFill: {
        const uint32_t value = command.fill().value();
        if (value > 0xff) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "fill_value_out_of_range: submit command %d of %d (fill): value "
              "%u is not a byte. Fix: send a fill value from 0 to 255.",
              i + 1, request.commands_size(), value));
        }
        commands.push_back(FillCommand{DecodeView(command.fill().dst()),
                                       static_cast<uint8_t>(value)});
        break;
      }
      case hrx::v1::Command::kCopy:
        commands.push_back(CopyCommand{DecodeView(command.copy().dst()),
                                       DecodeView(command.copy().src())});
        break;
      case hrx::v1::Command::kUpload:
        commands.push_back(
            UploadCommand{DecodeView(command.upload().dst()),
                          command.upload().data()});
        break;
      case hrx::v1::Command::OP_NOT_SET:
        return absl::InvalidArgumentError(absl::StrFormat(
            "empty_command: submit command %d of %d has no operation set. "
            "Fix: set fill, copy or upload.",
            i + 1, request.commands_size()));
    }
  }
  return commands;
}

}  // namespace hrx::daemon
