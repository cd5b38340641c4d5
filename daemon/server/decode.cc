#include "daemon/server/decode.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "shared/launch_check.h"
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

namespace {

absl::StatusOr<std::array<uint32_t, 3>> DecodeDims(
    const google::protobuf::RepeatedField<uint32_t>& dims, const char* name,
    int index, int count) {
  if (dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad_launch_shape: submit command %d of %d (dispatch): %s has %d "
        "entries. Fix: send exactly 3 (x, y, z).",
        index + 1, count, name, dims.size()));
  }
  return std::array<uint32_t, 3>{dims[0], dims[1], dims[2]};
}

absl::StatusOr<Command> DecodeCommand(const hrx::v1::Command& command,
                                      int index, int count) {
  switch (command.op_case()) {
    case hrx::v1::Command::kFill: {
      const uint32_t value = command.fill().value();
      if (value > 0xff) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fill_value_out_of_range: submit command %d of %d (fill): value "
            "%u is not a byte. Fix: send a fill value from 0 to 255.",
            index + 1, count, value));
      }
      return FillCommand{DecodeView(command.fill().dst()),
                         static_cast<uint8_t>(value)};
    }
    case hrx::v1::Command::kCopy:
      return CopyCommand{DecodeView(command.copy().dst()),
                         DecodeView(command.copy().src())};
    case hrx::v1::Command::kUpload:
      return UploadCommand{DecodeView(command.upload().dst()),
                           command.upload().data()};
    case hrx::v1::Command::kRecordEvent:
      return RecordEventCommand{command.record_event().event()};
    case hrx::v1::Command::kWaitEvent:
      return WaitEventCommand{command.wait_event().event()};
    case hrx::v1::Command::kDispatch: {
      const hrx::v1::Dispatch& wire = command.dispatch();
      DispatchCommand dispatch;
      dispatch.kernel = wire.kernel();
      auto grid = DecodeDims(wire.grid(), "grid", index, count);
      if (!grid.ok()) return grid.status();
      auto block = DecodeDims(wire.block(), "block", index, count);
      if (!block.ok()) return block.status();
      dispatch.grid = *grid;
      dispatch.block = *block;
      if (wire.constants().size() > shared::kConstantsCapacity) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "constants_too_large: submit command %d of %d (dispatch): %u "
            "bytes of constants, the capacity is %u. Fix: pass at most %u "
            "bytes of scalars.",
            index + 1, count, wire.constants().size(), shared::kConstantsCapacity,
            shared::kConstantsCapacity));
      }
      dispatch.constants = wire.constants();
      for (const hrx::v1::View& view : wire.bindings()) {
        dispatch.bindings.push_back(DecodeView(view));
      }
      return dispatch;
    }
    case hrx::v1::Command::OP_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "empty_command: submit command %d of %d has no operation set. Fix: "
      "set one of fill, copy, upload, record_event, wait_event, dispatch.",
      index + 1, count));
}

}  // namespace

absl::StatusOr<std::vector<Command>> DecodeCommands(
    const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands) {
  std::vector<Command> decoded;
  decoded.reserve(commands.size());
  for (int i = 0; i < commands.size(); ++i) {
    auto command = DecodeCommand(commands[i], i, commands.size());
    if (!command.ok()) return command.status();
    decoded.push_back(*std::move(command));
  }
  return decoded;
}

absl::StatusOr<backend::KernelSignature> DecodeSignature(
    const hrx::v1::KernelSignature& signature) {
  backend::KernelSignature decoded;
  for (int i = 0; i < signature.args_size(); ++i) {
    const hrx::v1::KernelArg& arg = signature.args(i);
    if (arg.kind() == hrx::v1::KernelArg::KIND_SCALAR &&
        (arg.size() == 4 || arg.size() == 8)) {
      decoded.args.push_back({backend::ArgKind::kScalar, arg.size()});
    } else if (arg.kind() == hrx::v1::KernelArg::KIND_BUFFER && arg.size() == 0) {
      decoded.args.push_back({backend::ArgKind::kBuffer, 0});
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad_signature: declared argument %d has kind %d and size %u. Fix: "
          "declare scalars of 4 or 8 bytes and buffers of size 0.",
          i, static_cast<int>(arg.kind()), arg.size()));
    }
  }
  if (signature.workgroup_size_size() != 3 &&
      signature.workgroup_size_size() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad_signature: declared workgroup size has %d entries. Fix: send 3 "
        "(0 for any size in a dimension).",
        signature.workgroup_size_size()));
  }
  for (int d = 0; d < signature.workgroup_size_size(); ++d) {
    decoded.workgroup_size[d] = signature.workgroup_size(d);
  }
  return decoded;
}

void EncodeSignature(const backend::KernelSignature& signature,
                     hrx::v1::KernelSignature* out) {
  for (const backend::KernelArg& arg : signature.args) {
    hrx::v1::KernelArg* wire = out->add_args();
    wire->set_kind(arg.kind == backend::ArgKind::kBuffer
                       ? hrx::v1::KernelArg::KIND_BUFFER
                       : hrx::v1::KernelArg::KIND_SCALAR);
    wire->set_size(arg.size);
  }
  for (uint32_t size : signature.workgroup_size) out->add_workgroup_size(size);
}

}  // namespace hrx::daemon
