// The gRPC server: the hrx.v1 services plus the standard health service and
// server reflection, so any gRPC tool can discover and call the daemon.
#ifndef HRX_DAEMON_SERVER_SERVER_H_
#define HRX_DAEMON_SERVER_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/core.h"
#include "daemon/server/bound_sockets.h"
#include "daemon/server/fd_channel.h"
#include "daemon/server/local_listener.h"
#include "grpcpp/server.h"

namespace hrx::daemon {

// Largest request the daemon accepts. Bulk data belongs in shared memory;
// inline uploads are chunked by the client well below this.
inline constexpr int kMaxRequestBytes = 16 << 20;

class Services;

// The optional TCP listener for remote callers. TLS with client
// certificates is mandatory: a caller is its certificate's subject.
struct RemoteListener {
  std::string address;        // HOST:PORT
  std::string cert_pem;       // the server's certificate chain
  std::string key_pem;        // its private key
  std::string client_ca_pem;  // CA that signs accepted client certificates
};

class DaemonServer {
 public:
  // Listens on the Unix socket at `socket_path` (which must not exist),
  // created with `socket_mode`.
  // With `inherited_fd` >= 0 (socket activation), accepts on that listening
  // socket instead of creating `socket_path`.
  // `bound` says where socket-bound tenants' sockets go. With
  // `executor_rings`, rings of tenants whose work runs in an executor are
  // served there (executor_rings.h).
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(
      Core& core, const std::string& socket_path, unsigned socket_mode,
      const BoundSocketOptions& bound,
      const std::optional<RemoteListener>& remote = std::nullopt,
      int inherited_fd = -1, bool executor_rings = false);
  ~DaemonServer();

  // Stops accepting calls and waits up to `grace` for calls in progress
  // (including ones waiting for the device) before cancelling the rest.
  void Shutdown(absl::Duration grace);

 private:
  DaemonServer(std::unique_ptr<Services> services,
               std::unique_ptr<grpc::Server> server,
               std::unique_ptr<BoundSockets> bound,
               std::unique_ptr<LocalListener> listener,
               std::unique_ptr<FdChannel> fd_channel);

  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BoundSockets> bound_;
  std::unique_ptr<LocalListener> listener_;
  std::unique_ptr<FdChannel> fd_channel_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_SERVER_H_
