// The local connections the daemon accepted, with each peer's
// kernel-reported identity. The daemon accepts Unix-socket connections
// itself, reads SO_PEERCRED while the connection is provably alive, and hands
// the descriptor to gRPC, whose calls then report the peer as "fd:N".
// Identity therefore never comes from the request.
//
// Each connection gets an id that is never reused, and the registry keeps a
// duplicate of its descriptor under an epoll watch for the peer's hangup:
// that is how the daemon learns a connection ended (gRPC reports calls, not
// connections), so sessions bound to it close, its admission charge returns
// and its per-uid slot frees. The duplicate is the one extra descriptor each
// connection costs.
//
// A descriptor number is reused only after gRPC has closed the connection
// that held it, and the accept that reuses it replaces the number's entry
// before gRPC sees the new connection, so a lookup always describes the live
// connection.
//
// Thread-safe. The closed callback runs on the registry's thread.
#ifndef HRX_DAEMON_SERVER_PEER_REGISTRY_H_
#define HRX_DAEMON_SERVER_PEER_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/identity.h"

namespace hrx::daemon {

// Local connections one uid may hold open at once, before any tenant is
// consulted (a pre-authentication limit: strangers share the default
// tenant, and one of them must not take every slot).
inline constexpr size_t kMaxConnectionsPerUid = 64;
// Local connections open at once, in all.
inline constexpr size_t kMaxLocalConnections = 4096;
// Of those, connections through socket-bound tenants' sockets (which the
// per-uid slots do not bound): the rest stay for the main socket, so that
// admins, probes and the device plugin always get in.
inline constexpr size_t kMaxBoundConnections = kMaxLocalConnections / 2;

class PeerRegistry {
 public:
  // Runs once per recorded connection, after its peer hung up.
  using ClosedCallback = std::function<void(uint64_t connection)>;

  PeerRegistry();
  ~PeerRegistry();  // stops watching; closes the duplicates
  PeerRegistry(const PeerRegistry&) = delete;
  PeerRegistry& operator=(const PeerRegistry&) = delete;

  // Set once, before the first Admit.
  void set_on_closed(ClosedCallback on_closed) {
    on_closed_ = std::move(on_closed);
  }

  // Records connection `fd` (still owned by the caller) of `identity` and
  // watches it; `hold` (an admission charge, say) is kept until the peer
  // hangs up. Returns the identity with its connection id filled in.
  // RESOURCE_EXHAUSTED "too_many_connections" past kMaxConnectionsPerUid
  // for the uid (not counted for bound tenants' sockets, whose tenant's
  // connections ceiling applies; they have kMaxBoundConnections between
  // them) or kMaxLocalConnections in all.
  absl::StatusOr<PeerIdentity> Admit(int fd, PeerIdentity identity,
                                     std::shared_ptr<const void> hold);

  // The identity behind a call whose ServerContext::peer() is `peer`.
  std::optional<PeerIdentity> Lookup(const std::string& peer) const;

  // Ends every connection that came through bound tenant `tenant`'s socket
  // (the tenant was removed); returns how many.
  size_t CloseBound(const std::string& tenant);

  // Connections open now: of `uid` (bound tenants' connections aside), and
  // in all.
  size_t connections_of(uid_t uid) const;
  size_t connections() const;

 private:
  struct Connection {
    PeerIdentity identity;
    int fd = -1;          // the number gRPC knows it by
    int watched_fd = -1;  // our duplicate, under the epoll watch
    std::shared_ptr<const void> hold;
  };
  void Run();
  void Closed(int watched_fd);

  ClosedCallback on_closed_;
  const int epoll_fd_;
  const int wake_fd_;
  mutable absl::Mutex mu_;
  uint64_t next_connection_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Connection> connections_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, uint64_t> by_fd_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, uint64_t> by_watched_fd_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, size_t> per_uid_ ABSL_GUARDED_BY(mu_);
  size_t bound_ ABSL_GUARDED_BY(mu_) = 0;  // through bound tenants' sockets
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_PEER_REGISTRY_H_
