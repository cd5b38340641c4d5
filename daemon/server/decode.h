// Wire to core: one Decode function per message. All shape validation of
// wire input (ranges of enums and small fields, the session metadata) lives
// here; checks against live objects live in daemon/core.
#ifndef HRX_DAEMON_SERVER_DECODE_H_
#define HRX_DAEMON_SERVER_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/core/core.h"
#include "daemon/core/handle_authority.h"
#include "daemon/core/handle_opener.h"
#include "daemon/core/types.h"
#include "daemon/server/peer_registry.h"
#include "grpcpp/server_context.h"
#include "hrx/v1/admin.pb.h"
#include "hrx/v1/graph.pb.h"
#include "hrx/v1/kernel.pb.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// The calling session, and the handle authority that seals and opens the
// handles it sends and receives.
class Caller {
 public:
  Caller(const HandleOpener& authority, uint64_t session)
      : authority_(&authority), session_(session) {}

  uint64_t session() const { return session_; }

  // The object a `kind` handle of this session names; see HandleAuthority.
  absl::StatusOr<uint64_t> Object(const hrx::v1::Handle& handle,
                                  shared::HandleKind kind,
                                  std::string_view what) const;
  // As Object, but an absent handle is 0.
  absl::StatusOr<uint64_t> OptionalObject(bool present,
                                          const hrx::v1::Handle& handle,
                                          shared::HandleKind kind,
                                          std::string_view what) const;
  void Seal(uint64_t object, hrx::v1::Handle* out) const;

  absl::StatusOr<ViewRef> View(const hrx::v1::View& view,
                               std::string_view what) const;

  // INVALID_ARGUMENT for a fill value above 255, a dispatch whose grid or
  // block does not have 3 entries or whose constants pass
  // shared::kConstantsCapacity bytes, more than kMaxCommandsPerSubmit, or a
  // command with no op set; the message names the command's position
  // ("submit command 2 of 5 (fill dst)"). Handles are opened here.
  absl::StatusOr<std::vector<Command>> Commands(
      const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands)
      const;

  // A recorded graph: each node's fill, copy or dispatch decoded as a
  // command's would be, read from the node's own oneof (positions name
  // "graph node 2 of 5").
  absl::StatusOr<GraphSpec> Graph(
      const hrx::v1::CreateGraphExecRequest& request) const;

 private:
  // Where a command sits in its request, for refusals.
  struct Position {
    const char* noun;  // "submit command" or "graph node"
    int index;
    int count;
    // "submit command 2 of 5 (fill dst)"; without `part`, no parentheses.
    std::string Label(std::string_view part = "") const;
  };
  absl::StatusOr<Command> DecodeCommand(const hrx::v1::Command& command,
                                        const Position& at) const;
  absl::StatusOr<FillCommand> DecodeFill(const hrx::v1::Fill& fill,
                                         const Position& at) const;
  absl::StatusOr<CopyCommand> DecodeCopy(const hrx::v1::Copy& copy,
                                         const Position& at) const;
  absl::StatusOr<DispatchCommand> DecodeDispatch(
      const hrx::v1::Dispatch& dispatch, const Position& at) const;

  const HandleOpener* authority_;
  uint64_t session_;
};

// Who is calling, from the connection's kernel-reported credentials.
// UNAUTHENTICATED "unidentified_caller" when the connection is not one the
// daemon accepted itself.
absl::StatusOr<PeerIdentity> Identify(const grpc::ServerContextBase& context,
                                      const PeerRegistry& peers);

// The session named by the call's "hrx-session" metadata, checked to belong
// to the calling process. UNAUTHENTICATED when the metadata is absent or
// malformed; otherwise as HandleAuthority::OpenSession and
// Core::VerifyCaller.
absl::StatusOr<Caller> DecodeCaller(const grpc::ServerContextBase& context,
                                    Core& core, const PeerRegistry& peers);

shared::WireHandle ToWire(const hrx::v1::Handle& handle);
void FromWire(const shared::WireHandle& wire, hrx::v1::Handle* out);

// INVALID_ARGUMENT "bad_signature" for an unknown kind, a scalar that is not
// 4 or 8 bytes, or a workgroup size without 3 entries.
absl::StatusOr<backend::KernelSignature> DecodeSignature(
    const hrx::v1::KernelSignature& signature);
void EncodeSignature(const backend::KernelSignature& signature,
                     hrx::v1::KernelSignature* out);

hrx::v1::Role EncodeRole(Role role);
// Every resource's count, by name, into an hrx.v1.Usage.
void EncodeUsage(const UsageCounts& usage, hrx::v1::Usage* out);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_DECODE_H_
