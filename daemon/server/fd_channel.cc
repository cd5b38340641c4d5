#include "daemon/server/fd_channel.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/fd_channel_wire.h"

namespace hrx::daemon {
namespace {

bool ReadFully(int fd, char* data, size_t length) {
  size_t done = 0;
  while (done < length) {
    const ssize_t n = read(fd, data + done, length - done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void Reply(int fd, const absl::Status& status, int descriptor) {
  std::string message(status.message());
  if (message.size() > shared::kMaxFdReplyMessage) {
    message.resize(shared::kMaxFdReplyMessage);
  }
  shared::FdReplyHeader header{shared::kFdReplyMagic,
                               static_cast<int32_t>(status.code()),
                               static_cast<uint32_t>(message.size()), 0};
  iovec parts[2] = {{&header, sizeof(header)},
                    {message.data(), message.size()}};
  msghdr reply{};
  reply.msg_iov = parts;
  reply.msg_iovlen = message.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (descriptor >= 0) {
    reply.msg_control = control;
    reply.msg_controllen = sizeof(control);
    cmsghdr* rights = CMSG_FIRSTHDR(&reply);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(rights), &descriptor, sizeof(int));
  }
  (void)sendmsg(fd, &reply, MSG_NOSIGNAL);
}

}  // namespace

std::string FdChannelPath(const std::string& socket_path) {
  return socket_path + ".fds";
}

absl::StatusOr<std::unique_ptr<FdChannel>> FdChannel::Start(
    const std::string& path, unsigned socket_mode, Core& core) {
  unlink(path.c_str());  // a stale one; the daemon holds the socket lock
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (fd < 0 || path.size() >= sizeof(address.sun_path) ||
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      chmod(path.c_str(), socket_mode) != 0 || listen(fd, 64) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrFormat(
        "listen_failed: descriptor side channel %s: %s. Fix: shorten --socket "
        "(the side channel's path adds 4 bytes) or check the directory.",
        path, error));
  }
  auto channel = std::unique_ptr<FdChannel>(new FdChannel(path, core));
  auto acceptor = Acceptor::Start(fd, [raw = channel.get()](int peer) {
    raw->Serve(peer);
    close(peer);
  });
  if (!acceptor.ok()) return acceptor.status();
  channel->acceptor_ = *std::move(acceptor);
  return channel;
}

FdChannel::FdChannel(std::string path, Core& core)
    : path_(std::move(path)), core_(core) {}

FdChannel::~FdChannel() {
  acceptor_.reset();  // stop accepting before the path goes away
  unlink(path_.c_str());
}

void FdChannel::Serve(int fd) {
  // A slow or silent peer must not stall the channel for long.
  const timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  char ticket[shared::kTicketBytes];
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0 ||
      !ReadFully(fd, ticket, sizeof(ticket))) {
    Reply(fd,
          absl::InvalidArgumentError(
              "bad_ticket: the side channel expects a 16-byte ticket. Fix: "
              "send the ticket Buffers.Export returned."),
          -1);
    return;
  }
  auto descriptor = core_.Redeem(
      std::string_view(ticket, sizeof(ticket)),
      PeerIdentity{credentials.uid, credentials.gid, credentials.pid, ""});
  if (!descriptor.ok()) {
    Reply(fd, descriptor.status(), -1);
    return;
  }
  // The descriptor is closed here once sent (the peer holds its own copy),
  // or if sending fails: it cannot leak either way.
  Reply(fd, absl::OkStatus(), descriptor->get());
}

}  // namespace hrx::daemon
