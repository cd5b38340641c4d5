// Caller's decoding of batches and graphs: one decoder per operation, shared
// by stream commands and graph nodes, each reading the message's own oneof.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/server/decode.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

absl::StatusOr<std::array<uint32_t, 3>> DecodeDims(
    const google::protobuf::RepeatedField<uint32_t>& dims, const char* name,
    const std::string& label) {
  if (dims.size() != 3) {
    return Refusal(Reason::kBadLaunchShape,
                   absl::StrFormat("%s: %s has %d entries. Fix: send exactly "
                                   "3 (x, y, z).",
                                   label, name, dims.size()));
  }
  return std::array<uint32_t, 3>{dims[0], dims[1], dims[2]};
}

}  // namespace

std::string Caller::Position::Label(std::string_view part) const {
  std::string label = absl::StrFormat("%s %d of %d", noun, index + 1, count);
  if (!part.empty()) absl::StrAppend(&label, " (", std::string(part), ")");
  return label;
}

absl::StatusOr<FillCommand> Caller::DecodeFill(const hrx::v1::Fill& fill,
                                               const Position& at) const {
  if (fill.value() > 0xff) {
    return Refusal(Reason::kFillValueOutOfRange,
                   absl::StrFormat("%s: value %u is not a byte. Fix: send a "
                                   "fill value from 0 to 255.",
                                   at.Label("fill"), fill.value()));
  }
  HRX_ASSIGN_OR_RETURN(ViewRef dst, View(fill.dst(), at.Label("fill dst")));
  return FillCommand{dst, static_cast<uint8_t>(fill.value())};
}

absl::StatusOr<CopyCommand> Caller::DecodeCopy(const hrx::v1::Copy& copy,
                                               const Position& at) const {
  HRX_ASSIGN_OR_RETURN(ViewRef dst, View(copy.dst(), at.Label("copy dst")));
  HRX_ASSIGN_OR_RETURN(ViewRef src, View(copy.src(), at.Label("copy src")));
  return CopyCommand{dst, src};
}

absl::StatusOr<DispatchCommand> Caller::DecodeDispatch(
    const hrx::v1::Dispatch& wire, const Position& at) const {
  const std::string label = at.Label("dispatch");
  DispatchCommand dispatch;
  HRX_ASSIGN_OR_RETURN(dispatch.kernel,
                       Object(wire.kernel(), shared::HandleKind::kKernel,
                              at.Label("dispatch kernel")));
  HRX_ASSIGN_OR_RETURN(dispatch.grid, DecodeDims(wire.grid(), "grid", label));
  HRX_ASSIGN_OR_RETURN(dispatch.block,
                       DecodeDims(wire.block(), "block", label));
  if (wire.constants().size() > shared::kConstantsCapacity) {
    return Refusal(Reason::kConstantsTooLarge,
                   absl::StrFormat(
                       "%s: %u bytes of constants, the capacity is %u. Fix: "
                       "pass at most %u bytes of scalars.",
                       label, wire.constants().size(),
                       shared::kConstantsCapacity, shared::kConstantsCapacity));
  }
  dispatch.constants = wire.constants();
  for (int b = 0; b < wire.bindings_size(); ++b) {
    HRX_ASSIGN_OR_RETURN(
        ViewRef view,
        View(wire.bindings(b), at.Label(absl::StrCat("dispatch binding ", b))));
    dispatch.bindings.push_back(view);
  }
  return dispatch;
}

absl::StatusOr<Command> Caller::DecodeCommand(const hrx::v1::Command& command,
                                              const Position& at) const {
  switch (command.op_case()) {
    case hrx::v1::Command::kFill:
      return DecodeFill(command.fill(), at);
    case hrx::v1::Command::kCopy:
      return DecodeCopy(command.copy(), at);
    case hrx::v1::Command::kUpload: {
      HRX_ASSIGN_OR_RETURN(
          ViewRef dst, View(command.upload().dst(), at.Label("upload dst")));
      return UploadCommand{dst, command.upload().data()};
    }
    case hrx::v1::Command::kRecordEvent:
      return RecordEventCommand{command.record_event().event()};
    case hrx::v1::Command::kWaitEvent:
      return WaitEventCommand{command.wait_event().event()};
    case hrx::v1::Command::kDispatch:
      return DecodeDispatch(command.dispatch(), at);
    case hrx::v1::Command::kLaunchGraph: {
      HRX_ASSIGN_OR_RETURN(
          uint64_t exec,
          Object(command.launch_graph().exec(), shared::HandleKind::kGraphExec,
                 at.Label("launch_graph exec")));
      return LaunchGraphCommand{exec};
    }
    case hrx::v1::Command::OP_NOT_SET:
      break;
  }
  return Refusal(Reason::kEmptyCommand,
                 absl::StrFormat("%s has no operation set. Fix: set one of "
                                 "fill, copy, upload, record_event, "
                                 "wait_event, dispatch, launch_graph.",
                                 at.Label()));
}

absl::StatusOr<std::vector<Command>> Caller::Commands(
    const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands)
    const {
  // Checked again by the core; here first, so an oversized batch costs no
  // handle openings or copies.
  if (static_cast<size_t>(commands.size()) > kMaxCommandsPerSubmit) {
    return Refusal(Reason::kBatchTooLarge,
                   absl::StrFormat("submit: %u commands in one batch, the "
                                   "limit is %u. Fix: split the batch.",
                                   commands.size(), kMaxCommandsPerSubmit));
  }
  std::vector<Command> decoded;
  decoded.reserve(commands.size());
  for (int i = 0; i < commands.size(); ++i) {
    HRX_ASSIGN_OR_RETURN(
        Command command,
        DecodeCommand(commands[i],
                      Position{"submit command", i, commands.size()}));
    decoded.push_back(std::move(command));
  }
  return decoded;
}

absl::StatusOr<GraphSpec> Caller::Graph(
    const hrx::v1::CreateGraphExecRequest& request) const {
  GraphSpec spec;
  spec.profiled = request.profiled();
  spec.labels.assign(request.labels().begin(), request.labels().end());
  const int count = request.nodes_size();
  if (static_cast<size_t>(count) > kMaxGraphNodes) {
    return Refusal(Reason::kGraphTooLarge,
                   absl::StrFormat("finish graph: %u nodes, the capacity is "
                                   "%u. Fix: split the graph.",
                                   count, kMaxGraphNodes));
  }
  spec.nodes.reserve(count);
  for (int i = 0; i < count; ++i) {
    const hrx::v1::GraphNode& node = request.nodes(i);
    const Position at{"graph node", i, count};
    GraphNodeSpec& out = spec.nodes.emplace_back();
    out.after.assign(node.after().begin(), node.after().end());
    switch (node.op_case()) {
      case hrx::v1::GraphNode::kFill: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeFill(node.fill(), at));
        break;
      }
      case hrx::v1::GraphNode::kCopy: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeCopy(node.copy(), at));
        break;
      }
      case hrx::v1::GraphNode::kDispatch: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeDispatch(node.dispatch(), at));
        break;
      }
      case hrx::v1::GraphNode::kJoin:
        out.op = JoinCommand{};
        break;
      case hrx::v1::GraphNode::OP_NOT_SET:
        return Refusal(Reason::kEmptyNode,
                       absl::StrFormat("%s has no operation set. Fix: set "
                                       "fill, copy, dispatch or join.",
                                       at.Label()));
    }
  }
  return spec;
}

}  // namespace hrx::daemon
