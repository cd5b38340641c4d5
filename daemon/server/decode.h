// Wire to core: one Decode function per message. All shape validation of
// wire input (ranges of enums and small fields, the session metadata) lives
// here; checks against live objects live in daemon/core.
#ifndef HRX_DAEMON_SERVER_DECODE_H_
#define HRX_DAEMON_SERVER_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/core.h"
#include "daemon/core/handle_authority.h"
#include "daemon/server/peer_registry.h"
#include "daemon/core/types.h"
#include "grpcpp/server_context.h"
#include "daemon/backend/backend.h"
#include "hrx/v1/graph.pb.h"
#include "hrx/v1/kernel.pb.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

// The calling session, and the handle authority that seals and opens the
// handles it sends and receives.
class Caller {
 public:
  Caller(const HandleAuthority& authority, uint64_t session)
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
  // block does not have 3 entries or whose constants pass 256 bytes, or a
  // command with no op set; the message names the command's position.
  absl::StatusOr<std::vector<Command>> Commands(
      const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands)
      const;

  // A recorded graph: each node's command decoded as a submit command would
  // be (positions name "graph node").
  absl::StatusOr<GraphSpec> Graph(const hrx::v1::CreateGraphExecRequest& request)
      const;

 private:
  absl::StatusOr<Command> DecodeCommand(const hrx::v1::Command& command,
                                        int index, int count) const;

  const HandleAuthority* authority_;
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

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_DECODE_H_
