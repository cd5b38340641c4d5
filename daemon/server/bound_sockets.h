// The listening sockets of socket-bound tenants (docs/kubernetes.md). Each
// bound tenant gets a directory of its own under the tenant socket
// directory, holding its gRPC socket (hrxd.sock) and descriptor side
// channel (hrxd.sock.fds); whoever connects there is that tenant. A
// container is given the tenant by mounting the directory.
//
// Directories outlive hrxd: a stop removes the sockets but keeps the
// directories, because containers hold bind mounts of them, and a mount of a
// directory that was removed and made again would show the old, empty one.
// Removing the tenant removes its directory.
//
// The tenant socket directory itself is 0700: nobody but hrxd's user can
// reach a tenant's socket through it (names can be guessed), so a tenant
// is given by mounting its directory, never by its path. Tenant directories
// are 0755 and must not be writable by anyone else; files are removed
// relative to the directory, never through a link.
//
// One name is in one state at a time: being created, serving, or being
// removed. A create or remove of a name in another operation is refused
// (UNAVAILABLE "tenant_busy"), so a removal finishing late never touches a
// newer tenant of the same name.
//
// Thread-safe.
#ifndef HRX_DAEMON_SERVER_BOUND_SOCKETS_H_
#define HRX_DAEMON_SERVER_BOUND_SOCKETS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/core.h"
#include "daemon/server/fd_channel.h"
#include "daemon/server/local_listener.h"
#include "daemon/server/peer_registry.h"
#include "grpcpp/server.h"

namespace hrx::daemon {

// The socket's name inside a bound tenant's directory.
inline constexpr char kBoundSocketName[] = "hrxd.sock";

struct BoundSocketOptions {
  std::string root;  // --tenant_socket_dir
  size_t max_bound_tenants = kDefaultMaxBoundTenants;
};

// The longest bound tenant name whose side channel (ROOT/NAME/hrxd.sock.fds)
// fits a Unix socket path under `root`: kMaxBoundTenantNameBytes, or less
// when the root's path is long (0: no name fits).
size_t MaxBoundTenantNameBytes(const std::string& root);

class BoundSockets {
 public:
  struct Removed {
    uint64_t sessions = 0;
    uint64_t connections = 0;
  };
  using RemoveDone = std::function<void(absl::StatusOr<Removed>)>;

  BoundSockets(BoundSocketOptions options, grpc::Server& server,
               PeerRegistry& peers, Core& core);
  ~BoundSockets();  // StopAll

  // Adds the tenant to the core, then makes its directory and starts
  // serving its socket; nothing is left behind when any step fails
  // (UNAVAILABLE "listen_failed" for the socket or directory,
  // "tenant_busy" while the name is being removed).
  absl::StatusOr<BoundTenantSummary> Create(const std::string& name,
                                            const Limits& limits,
                                            bool load_kernels,
                                            const Labels& labels);
  // Stops serving the tenant's socket, removes the tenant from the core,
  // ends its connections and removes its directory; `done` runs once its
  // sessions have closed. NOT_FOUND "unknown_tenant" for a name that is no
  // bound tenant; UNAVAILABLE "tenant_busy" while it is being created or
  // removed.
  void Remove(const std::string& name, RemoveDone done);
  // hrxd stops: every socket stops serving and is removed; directories and
  // tenants stay.
  void StopAll();

  const BoundSocketOptions& options() const { return options_; }
  std::string DirectoryOf(const std::string& name) const;
  // MaxBoundTenantNameBytes of this root.
  size_t MaxNameBytes() const;

 private:
  enum class State { kCreating, kServing, kRemoving };
  struct Serving {
    State state = State::kCreating;
    std::unique_ptr<LocalListener> listener;
    std::unique_ptr<FdChannel> side_channel;
  };
  absl::StatusOr<Serving> Serve(const std::string& name);
  static void Stop(Serving& serving);
  // Removes the tenant's socket files (and its directory, when asked),
  // without following a link in their place.
  void RemoveSockets(const std::string& name, bool and_directory) const;
  absl::Status Busy(const std::string& name, State state) const;

  const BoundSocketOptions options_;
  grpc::Server& server_;
  PeerRegistry& peers_;
  Core& core_;
  absl::Mutex mu_;
  std::map<std::string, Serving> serving_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_BOUND_SOCKETS_H_
