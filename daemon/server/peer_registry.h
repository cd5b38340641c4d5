// The kernel-reported identity of each local connection. The daemon accepts
// Unix-socket connections itself, reads SO_PEERCRED while the connection is
// provably alive, and hands the descriptor to gRPC, whose calls then report
// the peer as "fd:N". Identity therefore never comes from the request.
//
// A descriptor number is reused only after gRPC has closed the connection
// that held it, and the accept that reuses it replaces the entry before gRPC
// sees the new connection, so a lookup always describes the live connection.
//
// Thread-safe.
#ifndef HRX_DAEMON_SERVER_PEER_REGISTRY_H_
#define HRX_DAEMON_SERVER_PEER_REGISTRY_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/identity.h"

namespace hrx::daemon {

class PeerRegistry {
 public:
  void Record(int fd, const PeerIdentity& identity);
  // The identity behind a call whose ServerContext::peer() is `peer`.
  std::optional<PeerIdentity> Lookup(const std::string& peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, PeerIdentity> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_PEER_REGISTRY_H_
