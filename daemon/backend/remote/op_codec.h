// The one translation between the backend's operations and the executor
// protocol's messages (proto/hrx/executor/v1/executor.proto), both ways:
// hrxd's remote queue encodes what its core prepared, naming each object by
// its id in the executor; the executor decodes against the objects it holds
// under those ids. Every op that crosses the link goes through here, so the
// two ends cannot drift apart.
//
// Decoding checks what it can without trusting the sender (ids it does not
// hold, spans past their memory, a launch shape without three dimensions,
// graph edges that point forward): hrxd never sends those, so each is
// refused as a broken daemon (INTERNAL stream_protocol, "report a bug").
#ifndef HRX_DAEMON_BACKEND_REMOTE_OP_CODEC_H_
#define HRX_DAEMON_BACKEND_REMOTE_OP_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "hrx/executor/v1/executor.pb.h"

namespace hrx::backend::remote {

// The ids, in one executor, of the objects an op names (hrxd's side).
class RemoteNames {
 public:
  virtual ~RemoteNames() = default;
  virtual absl::StatusOr<uint64_t> MemoryId(
      const backend::MemoryRef& memory) = 0;
  virtual absl::StatusOr<uint64_t> KernelId(
      const backend::KernelRef& kernel) = 0;
};

// The objects an executor holds by those ids (the executor's side).
class LocalObjects {
 public:
  virtual ~LocalObjects() = default;
  virtual absl::StatusOr<backend::MemoryRef> Memory(uint64_t id) const = 0;
  virtual absl::StatusOr<backend::KernelRef> Kernel(uint64_t id) const = 0;
  // A graph defined there (none, unless the holder keeps graphs).
  virtual absl::StatusOr<backend::GraphRef> Graph(uint64_t id) const;
};

absl::Status EncodeSpan(const backend::MemoryRef& memory, uint64_t offset,
                        uint64_t length, RemoteNames& names,
                        hrx::executor::v1::Span* out);
absl::Status EncodeWrite(const backend::MemoryRef& dst, uint64_t offset,
                         const std::string& bytes, RemoteNames& names,
                         hrx::executor::v1::Write* out);
absl::Status EncodeFill(const backend::FillOp& fill, RemoteNames& names,
                        hrx::executor::v1::Fill* out);
absl::Status EncodeCopy(const backend::CopyOp& copy, RemoteNames& names,
                        hrx::executor::v1::Copy* out);
absl::Status EncodeDispatch(const backend::DispatchArgs& dispatch,
                            RemoteNames& names,
                            hrx::executor::v1::Dispatch* out);
// The graph's nodes (the caller names the graph).
absl::Status EncodeGraph(const backend::GraphPlan& plan, RemoteNames& names,
                         hrx::executor::v1::DefineGraph* out);

struct DecodedSpan {
  backend::MemoryRef memory;
  uint64_t offset = 0;
  uint64_t length = 0;
};
absl::StatusOr<DecodedSpan> DecodeSpan(const hrx::executor::v1::Span& span,
                                       const LocalObjects& objects);
// The span a write lands in (its data is the message's).
absl::StatusOr<DecodedSpan> DecodeWrite(const hrx::executor::v1::Write& write,
                                        const LocalObjects& objects);
absl::StatusOr<backend::FillOp> DecodeFill(const hrx::executor::v1::Fill& fill,
                                           const LocalObjects& objects);
absl::StatusOr<backend::CopyOp> DecodeCopy(const hrx::executor::v1::Copy& copy,
                                           const LocalObjects& objects);
// `cached`: the result is kept for more launches (a DefineDispatch).
absl::StatusOr<backend::DispatchRef> DecodeDispatch(
    const hrx::executor::v1::Dispatch& dispatch, const LocalObjects& objects,
    bool cached = false);
absl::StatusOr<backend::GraphRef> DecodeGraph(
    const hrx::executor::v1::DefineGraph& graph, const LocalObjects& objects);

// INTERNAL stream_protocol: hrxd named something an executor does not have
// (`what` and its id): a broken daemon, never a tenant's doing.
absl::Status UnknownObject(std::string_view what, uint64_t id);

}  // namespace hrx::backend::remote

#endif  // HRX_DAEMON_BACKEND_REMOTE_OP_CODEC_H_
