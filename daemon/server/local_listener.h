// Accepts connections on the daemon's Unix socket itself, so that it can read
// each peer's credentials (SO_PEERCRED), admit it (the per-uid limit and the
// tenant's connections ceiling, before any request is read), record it in
// the PeerRegistry, and only then give the connection to gRPC
// (AddInsecureChannelFromFd). gRPC's own Unix listener cannot report who is
// calling. A refused connection is closed at once (the peer cannot be told
// why before the protocol starts), and logged: one warning per
// kRefusedConnectionLogInterval at most, counting those in between.
#ifndef HRX_DAEMON_SERVER_LOCAL_LISTENER_H_
#define HRX_DAEMON_SERVER_LOCAL_LISTENER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/core.h"
#include "daemon/server/acceptor.h"
#include "daemon/server/peer_registry.h"
#include "grpcpp/server.h"

namespace hrx::daemon {

// A flood of refused connections logs one line per interval, not one each.
inline constexpr absl::Duration kRefusedConnectionLogInterval =
    absl::Seconds(1);

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
  void LogRefused(const PeerIdentity& identity, const absl::Status& why);

  grpc::Server& server_;
  PeerRegistry& peers_;
  Core& core_;
  const std::string bound_tenant_;
  std::unique_ptr<Acceptor> acceptor_;
  // The acceptor's thread alone hands over connections: no lock.
  absl::Time refused_logged_at_ = absl::InfinitePast();
  uint64_t refused_unlogged_ = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_LOCAL_LISTENER_H_
