#include "daemon/server/decode.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "grpc/grpc_security_constants.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"

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
        return Refusal(
            Reason::kUnknownCertificate,
            "the client certificate has an empty subject, "
            "so it names nobody. Fix: issue the client a certificate whose "
            "subject a tenant lists in certificate_subjects.");
      }
      return remote;
    }
    return Refusal(
        Reason::kUnidentifiedCaller,
        absl::StrFormat("the daemon cannot tell who is calling over %s. "
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
    return Refusal(
        Reason::kNoSession,
        absl::StrFormat(
            "the call carries no \"%s\" metadata. Fix: call "
            "hrx.v1.Sessions/OpenSession and send its session handle as \"%s\" "
            "metadata on every call.",
            shared::kSessionMetadataKey, shared::kSessionMetadataKey));
  }
  const std::string text(it->second.data(), it->second.size());
  shared::WireHandle handle;
  if (!shared::ParseWireHandle(text, &handle)) {
    return Refusal(
        Reason::kBadSessionMetadata,
        absl::StrFormat(
            "\"%s\" metadata \"%s\" is not a session "
            "handle. Fix: send the session handle from OpenSession as four "
            "16-digit hex numbers joined by '.'.",
            shared::kSessionMetadataKey, text));
  }
  auto session = authority.OpenSession(handle);
  if (!session.ok()) return session.status();
  auto identity = Identify(context, peers);
  if (!identity.ok()) return identity.status();
  if (absl::Status mine = core.sessions().VerifyCaller(*session, *identity);
      !mine.ok()) {
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

absl::StatusOr<backend::KernelSignature> DecodeSignature(
    const hrx::v1::KernelSignature& signature) {
  backend::KernelSignature decoded;
  for (int i = 0; i < signature.args_size(); ++i) {
    const hrx::v1::KernelArg& arg = signature.args(i);
    if (arg.kind() == hrx::v1::KernelArg::KIND_SCALAR &&
        (arg.size() == 4 || arg.size() == 8)) {
      decoded.args.push_back({backend::ArgKind::kScalar, arg.size()});
    } else if (arg.kind() == hrx::v1::KernelArg::KIND_BUFFER &&
               arg.size() == 0) {
      decoded.args.push_back({backend::ArgKind::kBuffer, 0});
    } else {
      return Refusal(
          Reason::kBadSignature,
          absl::StrFormat(
              "declared argument %d has kind %d and size %u. Fix: "
              "declare scalars of 4 or 8 bytes and buffers of size 0.",
              i, static_cast<int>(arg.kind()), arg.size()));
    }
  }
  if (signature.workgroup_size_size() != 3 &&
      signature.workgroup_size_size() != 0) {
    return Refusal(
        Reason::kBadSignature,
        absl::StrFormat("declared workgroup size has %d entries. Fix: send 3 "
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

hrx::v1::Role EncodeRole(Role role) {
  switch (role) {
    case Role::kObserver:
      return hrx::v1::ROLE_OBSERVER;
    case Role::kAdmin:
      return hrx::v1::ROLE_ADMIN;
    case Role::kClient:
      break;
  }
  return hrx::v1::ROLE_CLIENT;
}

void EncodeUsage(const UsageCounts& usage, hrx::v1::Usage* out) {
  const auto* reflection = out->GetReflection();
  for (size_t r = 0; r < kResourceCount; ++r) {
    const auto* field = hrx::v1::Usage::descriptor()->FindFieldByName(
        std::string(ResourceName(static_cast<Resource>(r))));
    reflection->SetUInt64(out, field, usage[r]);
  }
}

}  // namespace hrx::daemon
