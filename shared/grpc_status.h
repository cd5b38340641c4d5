// The one place where absl::Status and grpc::Status meet. The canonical codes
// have the same numbers on both sides; messages pass through unchanged.
#ifndef HRX_SHARED_GRPC_STATUS_H_
#define HRX_SHARED_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hrx::shared {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace hrx::shared

#endif  // HRX_SHARED_GRPC_STATUS_H_
