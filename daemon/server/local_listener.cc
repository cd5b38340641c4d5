#include "daemon/server/local_listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "daemon/logging.h"
#include "grpcpp/server_posix.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

absl::Status Failed(const std::string& what, const std::string& path) {
  return Refusal(Reason::kListenFailed,
                 absl::StrFormat(
                     "%s %s: %s. Fix: check the socket directory exists and is "
                     "writable by the daemon.",
                     what, path, std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalListener>> LocalListener::Start(
    const std::string& socket_path, unsigned socket_mode, grpc::Server& server,
    PeerRegistry& peers, Core& core, const std::string& bound_tenant) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Failed("socket for", socket_path);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(),
               sizeof(address.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const absl::Status status = Failed("bind", socket_path);
    close(fd);
    return status;
  }
  if (chmod(socket_path.c_str(), socket_mode) != 0 || listen(fd, 128) != 0) {
    const absl::Status status = Failed("chmod/listen", socket_path);
    close(fd);
    return status;
  }
  return Accept(fd, server, peers, core, bound_tenant);
}

absl::StatusOr<std::unique_ptr<LocalListener>> LocalListener::FromFd(
    int listen_fd, grpc::Server& server, PeerRegistry& peers, Core& core) {
  fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
  return Accept(listen_fd, server, peers, core, /*bound_tenant=*/"");
}

absl::StatusOr<std::unique_ptr<LocalListener>> LocalListener::Accept(
    int listen_fd, grpc::Server& server, PeerRegistry& peers, Core& core,
    const std::string& bound_tenant) {
  auto listener = std::unique_ptr<LocalListener>(
      new LocalListener(server, peers, core, bound_tenant));
  auto acceptor = Acceptor::Start(
      listen_fd, [raw = listener.get()](int fd) { raw->HandOver(fd); });
  if (!acceptor.ok()) return acceptor.status();
  listener->acceptor_ = *std::move(acceptor);
  return listener;
}

LocalListener::LocalListener(grpc::Server& server, PeerRegistry& peers,
                             Core& core, std::string bound_tenant)
    : server_(server),
      peers_(peers),
      core_(core),
      bound_tenant_(std::move(bound_tenant)) {}

void LocalListener::Stop() { acceptor_->Stop(); }

void LocalListener::HandOver(int fd) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    close(fd);
    return;
  }
  PeerIdentity identity;
  identity.uid = credentials.uid;
  identity.gid = credentials.gid;
  identity.pid = credentials.pid;  // 0 when not visible in our namespace
  identity.bound_tenant = bound_tenant_;
  // Admission before a single byte is read: the tenant's connections
  // ceiling, then the per-uid and daemon-wide slots.
  absl::StatusOr<ChargeRef> charge = core_.AdmitConnection(identity);
  absl::StatusOr<PeerIdentity> admitted =
      charge.ok() ? peers_.Admit(fd, identity, *std::move(charge))
                  : absl::StatusOr<PeerIdentity>(charge.status());
  if (!admitted.ok()) {
    core_.refusals().Count(admitted.status());
    close(fd);  // the peer sees the connection end; it cannot hold a slot
    LogRefused(identity, admitted.status());
    return;
  }
  // gRPC needs a non-blocking descriptor; without it the client waits
  // forever for the server's SETTINGS frame.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  grpc::AddInsecureChannelFromFd(&server_, fd);
}

void LocalListener::LogRefused(const PeerIdentity& identity,
                               const absl::Status& why) {
  const absl::Time now = absl::Now();
  if (now - refused_logged_at_ < kRefusedConnectionLogInterval) {
    ++refused_unlogged_;
    return;
  }
  Logger("server")->warn(
      "refused a connection of uid {} (pid {}){}: {} ({} more refused since "
      "the last line)",
      identity.uid, identity.pid,
      bound_tenant_.empty() ? ""
                            : absl::StrFormat(" through bound tenant \"%s\"'s "
                                              "socket",
                                              bound_tenant_),
      std::string(why.message()), refused_unlogged_);
  refused_logged_at_ = now;
  refused_unlogged_ = 0;
}

}  // namespace hrx::daemon
