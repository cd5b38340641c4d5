// Accepts connections on the daemon's Unix socket itself, so that it can read
// each peer's credentials (SO_PEERCRED), admit it (the per-uid limit and the
// tenant's connections ceiling, before any request is read), record it in
// the PeerRegistry, and only then give the connection to gRPC
// (AddInsecureChannelFromFd). gRPC's own Unix listener cannot report who is
// calling. A refused connection is closed at once.
#ifndef HRX_DAEMON_SERVER_LOCAL_LISTENER_H_
#define HRX_DAEMON_SERVER_LOCAL_LISTENER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/core.h"
#include "daemon/server/acceptor.h"
#include "daemon/server/peer_registry.h"
#include "grpcpp/server.h"

namespace hrx::daemon {

class LocalListener {
 public:
  // Binds and listens on `socket_path` with mode `socket_mode`, then accepts
  // on a thread until Stop. `server` and `peers` must outlive the listener.
  // With `bound_tenant`, every caller accepted here is that socket-bound
  // tenant, whatever its uid.
  static absl::StatusOr<std::unique_ptr<LocalListener>> Start(
      const std::string& socket_path, unsigned socket_mode,
      grpc::Server& server, PeerRegistry& peers, Core& core,
      const std::string& bound_tenant = "");
  // Accepts on `listen_fd`, a listening Unix socket the service manager
  // passed (socket activation); the listener takes ownership.
  static absl::StatusOr<std::unique_ptr<LocalListener>> FromFd(
      int listen_fd, grpc::Server& server, PeerRegistry& peers, Core& core);

  // Stops accepting; connections already handed to gRPC are unaffected.
  void Stop();

 private:
  LocalListener(grpc::Server& server, PeerRegistry& peers, Core& core,
                std::string bound_tenant);
  static absl::StatusOr<std::unique_ptr<LocalListener>> Accept(
      int listen_fd, grpc::Server& server, PeerRegistry& peers, Core& core,
      const std::string& bound_tenant);
  void HandOver(int fd);

  grpc::Server& server_;
  PeerRegistry& peers_;
  Core& core_;
  const std::string bound_tenant_;
  std::unique_ptr<Acceptor> acceptor_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_LOCAL_LISTENER_H_
