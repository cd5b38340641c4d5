#include "daemon/server/peer_registry.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace hrx::daemon {

void PeerRegistry::Record(int fd, const PeerIdentity& identity) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = identity;
}

std::optional<PeerIdentity> PeerRegistry::Lookup(const std::string& peer) const {
  constexpr char kPrefix[] = "fd:";
  if (!absl::StartsWith(peer, kPrefix)) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(sizeof(kPrefix) - 1), &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hrx::daemon
