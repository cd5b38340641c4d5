#include "shared/grpc_status.h"

#include <string>

#include "shared/refusal.h"

namespace hrx::shared {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  // The daemon's refusals start with their reason token: re-attach it, so
  // ReasonOf works on what crossed the wire.
  return StatusFromWire(status.error_code(), status.error_message());
}

}  // namespace hrx::shared
