// Where hrxctl talks to: the local socket, or a remote daemon over TLS with
// a client certificate.
#ifndef HRX_CLIENT_HRXCTL_TARGET_H_
#define HRX_CLIENT_HRXCTL_TARGET_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace hrxctl {

struct Target {
  std::string socket_path;  // local use
  std::string remote;       // HOST:PORT; set for remote use
  std::string tls_cert, tls_key, tls_ca;

  std::shared_ptr<grpc::Channel> Channel() const;
  // A failed call's status; an unreachable daemon names where it was sought.
  absl::Status Check(const grpc::Status& status) const;
};

}  // namespace hrxctl

#endif  // HRX_CLIENT_HRXCTL_TARGET_H_
