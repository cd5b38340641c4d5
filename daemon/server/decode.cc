#include "daemon/server/decode.h"

#include <string>

#include "absl/strings/numbers.h"
#include "grpc/grpc_security_constants.h"
#include "absl/strings/str_format.h"
#include "shared/launch_check.h"
#include "shared/socket_path.h"
#include "shared/refusal.h"

namespace hrx::daemon {

absl::StatusOr<PeerIdentity> Identify(const grpc::ServerContextBase& context,
                                      const PeerRegistry& peers) {
  std::optional<PeerIdentity> identity = peers.Lookup(context.peer());
  if (!identity) {
    // A remote caller over TLS: its verified certificate's subject.
    auto auth = context.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      // A remote caller is its certificate's subject or nobody: never a uid.
      PeerIdentity remote;
      remote.remote = true;
      for (const auto& value :
           auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
        remote.certificate_subject.assign(value.data(), value.size());
      }
      if (remote.certificate_subject.empty()) {
        return Refusal(Reason::kUnknownCertificate, "the client certificate has an empty subject, "
            "so it names nobody. Fix: issue the client a certificate whose "
            "subject a tenant lists in certificate_subjects.");
      }
      return remote;
    }
    return Refusal(Reason::kUnidentifiedCaller,absl::StrFormat(
        "the daemon cannot tell who is calling over %s. "
        "Fix: connect through hrxd's Unix socket.",
        context.peer()));
  }
  return *identity;
}

absl::StatusOr<Caller> DecodeCaller(const grpc::ServerContextBase& context,
                                    Core& core, const PeerRegistry& peers) {
  const HandleAuthority& authority = core.handles();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(shared::kSessionMetadataKey);
  if (it == metadata.end()) {
    return Refusal(Reason::kNoSession,absl::StrFormat(
        "the call carries no \"%s\" metadata. Fix: call "
        "hrx.v1.Sessions/OpenSession and send its session handle as \"%s\" "
        "metadata on every call.",
        shared::kSessionMetadataKey, shared::kSessionMetadataKey));
  }
  const std::string text(it->second.data(), it->second.size());
  shared::WireHandle handle;
  if (!shared::ParseWireHandle(text, &handle)) {
    return Refusal(Reason::kBadSessionMetadata,absl::StrFormat(
        "\"%s\" metadata \"%s\" is not a session "
        "handle. Fix: send the session handle from OpenSession as four "
        "16-digit hex numbers joined by '.'.",
        shared::kSessionMetadataKey, text));
  }
  auto session = authority.OpenSession(handle);
  if (!session.ok()) return session.status();
  auto identity = Identify(context, peers);
  if (!identity.ok()) return identity.status();
  if (absl::Status mine = core.VerifyCaller(*session, *identity); !mine.ok()) {
    return mine;
  }
  return Caller(authority, *session);
}

shared::WireHandle ToWire(const hrx::v1::Handle& handle) {
  return shared::WireHandle{handle.instance(), handle.session(),
                            handle.object(), handle.tag()};
}

void FromWire(const shared::WireHandle& wire, hrx::v1::Handle* out) {
  out->set_instance(wire.instance);
  out->set_session(wire.session);
  out->set_object(wire.object);
  out->set_tag(wire.tag);
}

absl::StatusOr<uint64_t> Caller::Object(const hrx::v1::Handle& handle,
                                        shared::HandleKind kind,
                                        std::string_view what) const {
  return authority_->Open(ToWire(handle), session_, kind, what);
}

absl::StatusOr<uint64_t> Caller::OptionalObject(bool present,
                                                const hrx::v1::Handle& handle,
                                                shared::HandleKind kind,
                                                std::string_view what) const {
  if (!present) return uint64_t{0};
  return Object(handle, kind, what);
}

void Caller::Seal(uint64_t object, hrx::v1::Handle* out) const {
  FromWire(authority_->Seal(session_, object), out);
}

absl::StatusOr<ViewRef> Caller::View(const hrx::v1::View& view,
                                     std::string_view what) const {
  auto buffer = Object(view.buffer(), shared::HandleKind::kBuffer, what);
  if (!buffer.ok()) return buffer.status();
  return ViewRef{*buffer, view.offset(), view.length()};
}

namespace {

absl::StatusOr<std::array<uint32_t, 3>> DecodeDims(
    const google::protobuf::RepeatedField<uint32_t>& dims, const char* name,
    int index, int count) {
  if (dims.size() != 3) {
    return Refusal(Reason::kBadLaunchShape,absl::StrFormat(
        "submit command %d of %d (dispatch): %s has %d "
        "entries. Fix: send exactly 3 (x, y, z).",
        index + 1, count, name, dims.size()));
  }
  return std::array<uint32_t, 3>{dims[0], dims[1], dims[2]};
}

}  // namespace

absl::StatusOr<Command> Caller::DecodeCommand(const hrx::v1::Command& command,
                                              int index, int count) const {
  const std::string label =
      absl::StrFormat("submit command %d of %d", index + 1, count);
  switch (command.op_case()) {
    case hrx::v1::Command::kFill: {
      const uint32_t value = command.fill().value();
      if (value > 0xff) {
        return Refusal(Reason::kFillValueOutOfRange,absl::StrFormat(
            "submit command %d of %d (fill): value "
            "%u is not a byte. Fix: send a fill value from 0 to 255.",
            index + 1, count, value));
      }
      auto dst = View(command.fill().dst(), label + " (fill dst)");
      if (!dst.ok()) return dst.status();
      return FillCommand{*dst, static_cast<uint8_t>(value)};
    }
    case hrx::v1::Command::kCopy:
    {
      auto dst = View(command.copy().dst(), label + " (copy dst)");
      if (!dst.ok()) return dst.status();
      auto src = View(command.copy().src(), label + " (copy src)");
      if (!src.ok()) return src.status();
      return CopyCommand{*dst, *src};
    }
    case hrx::v1::Command::kUpload:
    {
      auto dst = View(command.upload().dst(), label + " (upload dst)");
      if (!dst.ok()) return dst.status();
      return UploadCommand{*dst, command.upload().data()};
    }
    case hrx::v1::Command::kRecordEvent:
      return RecordEventCommand{command.record_event().event()};
    case hrx::v1::Command::kWaitEvent:
      return WaitEventCommand{command.wait_event().event()};
    case hrx::v1::Command::kDispatch: {
      const hrx::v1::Dispatch& wire = command.dispatch();
      DispatchCommand dispatch;
      auto kernel = Object(wire.kernel(), shared::HandleKind::kKernel,
                           label + " (dispatch kernel)");
      if (!kernel.ok()) return kernel.status();
      dispatch.kernel = *kernel;
      auto grid = DecodeDims(wire.grid(), "grid", index, count);
      if (!grid.ok()) return grid.status();
      auto block = DecodeDims(wire.block(), "block", index, count);
      if (!block.ok()) return block.status();
      dispatch.grid = *grid;
      dispatch.block = *block;
      if (wire.constants().size() > shared::kConstantsCapacity) {
        return Refusal(Reason::kConstantsTooLarge,absl::StrFormat(
            "submit command %d of %d (dispatch): %u "
            "bytes of constants, the capacity is %u. Fix: pass at most %u "
            "bytes of scalars.",
            index + 1, count, wire.constants().size(), shared::kConstantsCapacity,
            shared::kConstantsCapacity));
      }
      dispatch.constants = wire.constants();
      for (int b = 0; b < wire.bindings_size(); ++b) {
        auto view = View(wire.bindings(b),
                         absl::StrFormat("%s (dispatch binding %d)", label, b));
        if (!view.ok()) return view.status();
        dispatch.bindings.push_back(*view);
      }
      return dispatch;
    }
    case hrx::v1::Command::kLaunchGraph: {
      auto exec = Object(command.launch_graph().exec(),
                         shared::HandleKind::kGraphExec,
                         label + " (launch_graph exec)");
      if (!exec.ok()) return exec.status();
      return LaunchGraphCommand{*exec};
    }
    case hrx::v1::Command::OP_NOT_SET:
      break;
  }
  return Refusal(Reason::kEmptyCommand,absl::StrFormat(
      "submit command %d of %d has no operation set. Fix: "
      "set one of fill, copy, upload, record_event, wait_event, dispatch, "
      "launch_graph.",
      index + 1, count));
}

absl::StatusOr<std::vector<Command>> Caller::Commands(
    const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands) const {
  std::vector<Command> decoded;
  decoded.reserve(commands.size());
  for (int i = 0; i < commands.size(); ++i) {
    auto command = DecodeCommand(commands[i], i, commands.size());
    if (!command.ok()) return command.status();
    decoded.push_back(*std::move(command));
  }
  return decoded;
}

absl::StatusOr<GraphSpec> Caller::Graph(
    const hrx::v1::CreateGraphExecRequest& request) const {
  GraphSpec spec;
  spec.profiled = request.profiled();
  spec.labels.assign(request.labels().begin(), request.labels().end());
  const int count = request.nodes_size();
  for (int i = 0; i < count; ++i) {
    const hrx::v1::GraphNode& node = request.nodes(i);
    GraphNodeSpec out;
    out.after.assign(node.after().begin(), node.after().end());
    hrx::v1::Command command;
    switch (node.op_case()) {
      case hrx::v1::GraphNode::kFill:
        *command.mutable_fill() = node.fill();
        out.op = GraphNodeSpec::Op::kFill;
        break;
      case hrx::v1::GraphNode::kCopy:
        *command.mutable_copy() = node.copy();
        out.op = GraphNodeSpec::Op::kCopy;
        break;
      case hrx::v1::GraphNode::kDispatch:
        *command.mutable_dispatch() = node.dispatch();
        out.op = GraphNodeSpec::Op::kDispatch;
        break;
      case hrx::v1::GraphNode::kJoin:
        out.op = GraphNodeSpec::Op::kJoin;
        spec.nodes.push_back(std::move(out));
        continue;
      case hrx::v1::GraphNode::OP_NOT_SET:
        return Refusal(Reason::kEmptyNode,absl::StrFormat(
            "graph node %d of %d has no operation set. Fix: set "
            "fill, copy, dispatch or join.",
            i + 1, count));
    }
    auto decoded = DecodeCommand(command, i, count);
    if (!decoded.ok()) return decoded.status();
    if (auto* fill = std::get_if<FillCommand>(&*decoded)) out.fill = *fill;
    if (auto* copy = std::get_if<CopyCommand>(&*decoded)) out.copy = *copy;
    if (auto* dispatch = std::get_if<DispatchCommand>(&*decoded)) {
      out.dispatch = std::move(*dispatch);
    }
    spec.nodes.push_back(std::move(out));
  }
  return spec;
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
      return Refusal(Reason::kBadSignature,absl::StrFormat(
          "declared argument %d has kind %d and size %u. Fix: "
          "declare scalars of 4 or 8 bytes and buffers of size 0.",
          i, static_cast<int>(arg.kind()), arg.size()));
    }
  }
  if (signature.workgroup_size_size() != 3 &&
      signature.workgroup_size_size() != 0) {
    return Refusal(Reason::kBadSignature,absl::StrFormat(
        "declared workgroup size has %d entries. Fix: send 3 "
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
