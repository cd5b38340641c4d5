#include "daemon/server/peer_registry.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {

PeerRegistry::PeerRegistry()
    : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_CLOEXEC)) {
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
  thread_ = std::thread([this] { Run(); });
}

PeerRegistry::~PeerRegistry() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [id, connection] : connections_) close(connection.watched_fd);
  close(epoll_fd_);
  close(wake_fd_);
}

absl::StatusOr<PeerIdentity> PeerRegistry::Admit(
    int fd, PeerIdentity identity, std::shared_ptr<const void> hold) {
  absl::MutexLock lock(&mu_);
  // A bound tenant's socket admits only that tenant, whose connections
  // ceiling bounds it: pods sharing a uid must not share one uid's slots.
  const bool per_uid = identity.bound_tenant.empty();
  if (!per_uid && bound_ >= kMaxBoundConnections) {
    return Refusal(
        Reason::kTooManyConnections,
        absl::StrFormat(
            "connection through bound tenant \"%s\"'s socket: %u "
            "connections are open through bound tenants' sockets (the limit "
            "is %u, of %u local connections in all). Fix: share one "
            "connection per process, and close idle ones.",
            identity.bound_tenant, bound_, kMaxBoundConnections,
            kMaxLocalConnections));
  }
  const size_t of_uid = per_uid ? per_uid_[identity.uid] : 0;
  if (of_uid >= kMaxConnectionsPerUid ||
      connections_.size() >= kMaxLocalConnections) {
    return Refusal(
        Reason::kTooManyConnections,
        absl::StrFormat(
            "uid %u holds %u connections (the limit is %u "
            "per uid), %u are open in all (the limit is %u). Fix: share one "
            "connection per process (one hrx::Client), and close idle ones.",
            identity.uid, of_uid, kMaxConnectionsPerUid, connections_.size(),
            kMaxLocalConnections));
  }
  const int watched = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (watched < 0) {
    return Refusal(
        Reason::kDescriptorsExhausted,
        absl::StrFormat("cannot watch a new connection: %s. Fix: raise "
                        "hrxd's open-file limit (LimitNOFILE).",
                        std::strerror(errno)));
  }
  epoll_event event{};
  event.events = EPOLLRDHUP;  // only the hangup; gRPC reads the data
  event.data.fd = watched;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watched, &event) != 0) {
    close(watched);
    return Refusal(
        Reason::kDescriptorsExhausted,
        absl::StrFormat("cannot watch a new connection: %s. Fix: raise "
                        "hrxd's open-file limit.",
                        std::strerror(errno)));
  }
  identity.connection = next_connection_++;
  if (per_uid) {
    ++per_uid_[identity.uid];
  } else {
    ++bound_;
  }
  by_fd_[fd] = identity.connection;
  by_watched_fd_[watched] = identity.connection;
  connections_[identity.connection] =
      Connection{identity, fd, watched, std::move(hold)};
  return identity;
}

std::optional<PeerIdentity> PeerRegistry::Lookup(
    const std::string& peer) const {
  constexpr char kPrefix[] = "fd:";
  if (!absl::StartsWith(peer, kPrefix)) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(sizeof(kPrefix) - 1), &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto number = by_fd_.find(fd);
  if (number == by_fd_.end()) return std::nullopt;
  auto it = connections_.find(number->second);
  if (it == connections_.end()) return std::nullopt;
  return it->second.identity;
}

size_t PeerRegistry::connections_of(uid_t uid) const {
  absl::MutexLock lock(&mu_);
  auto it = per_uid_.find(uid);
  return it == per_uid_.end() ? 0 : it->second;
}

size_t PeerRegistry::CloseBound(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  size_t closed = 0;
  for (const auto& [id, connection] : connections_) {
    if (connection.identity.bound_tenant != tenant) continue;
    // Shuts the socket itself (shared with gRPC's descriptor): gRPC sees
    // it end, and the watch reports the hangup, which closes its sessions.
    shutdown(connection.watched_fd, SHUT_RDWR);
    ++closed;
  }
  return closed;
}

size_t PeerRegistry::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

void PeerRegistry::Closed(int watched_fd) {
  uint64_t id = 0;
  std::shared_ptr<const void> hold;  // released outside the lock
  {
    absl::MutexLock lock(&mu_);
    auto watched = by_watched_fd_.find(watched_fd);
    if (watched == by_watched_fd_.end()) return;
    id = watched->second;
    by_watched_fd_.erase(watched);
    auto it = connections_.find(id);
    Connection& connection = it->second;
    // The number may already name a newer connection.
    auto number = by_fd_.find(connection.fd);
    if (number != by_fd_.end() && number->second == id) by_fd_.erase(number);
    if (!connection.identity.bound_tenant.empty()) {
      --bound_;
    } else if (--per_uid_[connection.identity.uid] == 0) {
      per_uid_.erase(connection.identity.uid);
    }
    hold = std::move(connection.hold);
    connections_.erase(it);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watched_fd, nullptr);
  close(watched_fd);
  hold.reset();
  if (on_closed_) on_closed_(id);
}

void PeerRegistry::Run() {
  epoll_event events[64];
  while (true) {
    const int count = epoll_wait(epoll_fd_, events, 64, -1);
    if (count < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < count; ++i) {
      if (events[i].data.fd == wake_fd_) return;
      Closed(events[i].data.fd);
    }
  }
}

}  // namespace hrx::daemon
