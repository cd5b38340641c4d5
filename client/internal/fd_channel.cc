#include "client/internal/fd_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/fd_channel_wire.h"
#include "shared/refusal.h"

namespace hrx::client::internal {

namespace {

// Bounds every later send and receive on `sock` by the time left until
// `deadline` (at least 1 ms; none for an infinite deadline).
void BoundSocketWaits(int sock, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return;
  const absl::Duration left =
      std::max(deadline - absl::Now(), absl::Milliseconds(1));
  const timeval bound = absl::ToTimeval(left);
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
}

absl::Status TimedOut(const std::string& fd_socket) {
  return Refusal(Reason::kDeadlineExceeded,
                 absl::StrFormat("hrxd's descriptor side channel %s did not "
                                 "answer by the deadline. Fix: pass a later "
                                 "deadline, or check the daemon with hrxctl "
                                 "status.",
                                 fd_socket));
}

}  // namespace

absl::StatusOr<shared::UniqueFd> RedeemTicket(const std::string& fd_socket,
                                              std::string_view ticket,
                                              absl::Time deadline,
                                              pid_t* server_pid) {
  shared::UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.valid()) BoundSocketWaits(sock.get(), deadline);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, fd_socket.c_str(),
               sizeof(address.sun_path) - 1);
  if (!sock.valid() ||
      connect(sock.get(), reinterpret_cast<sockaddr*>(&address),
              sizeof(address)) != 0) {
    return Refusal(Reason::kSideChannelUnreachable,
                   absl::StrFormat("cannot connect to hrxd's descriptor side "
                                   "channel %s: %s. Fix: check that the daemon "
                                   "runs and this process may "
                                   "open its socket.",
                                   fd_socket, std::strerror(errno)));
  }
  if (server_pid != nullptr) {
    ucred peer{};
    socklen_t length = sizeof(peer);
    *server_pid =
        getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0
            ? peer.pid
            : 0;
  }
  if (send(sock.get(), ticket.data(), ticket.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(ticket.size())) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return TimedOut(fd_socket);
    return Refusal(Reason::kSideChannelFailed,
                   absl::StrFormat("sending the ticket to %s: %s. Fix: retry.",
                                   fd_socket, std::strerror(errno)));
  }
  shared::FdReplyHeader header{};
  char message[shared::kMaxFdReplyMessage + 1] = {};
  iovec part{&header, sizeof(header)};
  msghdr reply{};
  reply.msg_iov = &part;
  reply.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  reply.msg_control = control;
  reply.msg_controllen = sizeof(control);
  const ssize_t got =
      recvmsg(sock.get(), &reply, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  const bool timed_out = got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  // Take ownership of any descriptor first, so no path below leaks it.
  shared::UniqueFd descriptor;
  for (cmsghdr* c = CMSG_FIRSTHDR(&reply); c != nullptr;
       c = CMSG_NXTHDR(&reply, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      descriptor.Reset(fd);
    }
  }
  if (timed_out) return TimedOut(fd_socket);
  if (got != static_cast<ssize_t>(sizeof(header)) ||
      header.magic != shared::kFdReplyMagic ||
      header.message_length > shared::kMaxFdReplyMessage) {
    return Refusal(Reason::kSideChannelProtocol,
                   absl::StrFormat("%s sent no valid reply. Fix: use a client "
                                   "library of the daemon's version.",
                                   fd_socket));
  }
  size_t read_total = 0;
  while (read_total < header.message_length) {
    const ssize_t n = recv(sock.get(), message + read_total,
                           header.message_length - read_total, 0);
    if (n <= 0) break;
    read_total += static_cast<size_t>(n);
  }
  if (header.code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(header.code),
                        std::string(message, read_total));
  }
  if (!descriptor.valid()) {
    return Refusal(Reason::kSideChannelProtocol,
                   absl::StrFormat("%s accepted the ticket but sent no "
                                   "descriptor. Fix: report this daemon bug.",
                                   fd_socket));
  }
  return descriptor;
}

}  // namespace hrx::client::internal
