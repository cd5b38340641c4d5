#include "daemon/server/fd_channel.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/fd_channel_wire.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

// The reply header and message (docs/resident-handles.md).
std::string EncodeReply(const absl::Status& status) {
  std::string message(status.message());
  if (message.size() > shared::kMaxFdReplyMessage) {
    message.resize(shared::kMaxFdReplyMessage);
  }
  shared::FdReplyHeader header{shared::kFdReplyMagic,
                               static_cast<int32_t>(status.code()),
                               static_cast<uint32_t>(message.size()), 0};
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  return bytes + message;
}

absl::Status BadTicket(size_t received) {
  return Refusal(
      Reason::kBadTicket,
      absl::StrFormat("the side channel expects a %u-byte ticket within %s of "
                      "connecting; it received %u bytes. Fix: send the ticket "
                      "Buffers.Export returned, at once.",
                      shared::kTicketBytes,
                      absl::FormatDuration(kSideChannelDeadline), received));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdChannel>> FdChannel::Start(
    const std::string& path, unsigned socket_mode, Core& core) {
  unlink(path.c_str());  // a stale one; the daemon holds the socket lock
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (fd < 0 || path.size() >= sizeof(address.sun_path) ||
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      chmod(path.c_str(), socket_mode) != 0 || listen(fd, 128) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) close(fd);
    return Refusal(
        Reason::kListenFailed,
        absl::StrFormat(
            "descriptor side channel %s: %s. Fix: shorten --socket "
            "(the side channel's path adds 4 bytes) or check the directory.",
            path, error));
  }
  auto channel = std::unique_ptr<FdChannel>(new FdChannel(path, core));
  ExchangeLimits limits;
  limits.deadline = kSideChannelDeadline;
  limits.max_connections = kMaxSideChannelConnections;
  limits.max_per_uid = kMaxSideChannelConnectionsPerUid;
  limits.max_request_bytes = shared::kTicketBytes;
  auto server = ExchangeServer::Start(
      fd, limits,
      [](const std::string& request) {
        return request.size() >= shared::kTicketBytes;
      },
      [raw = channel.get()](const std::string& request,
                            const ExchangeServer::Peer& peer) {
        return raw->Answer(request, peer);
      },
      [](const std::string& partial) {
        return EncodeReply(BadTicket(partial.size()));
      });
  if (!server.ok()) return server.status();
  channel->server_ = *std::move(server);
  return channel;
}

FdChannel::FdChannel(std::string path, Core& core)
    : path_(std::move(path)), core_(core) {}

FdChannel::~FdChannel() {
  server_.reset();  // stop serving before the path goes away
  unlink(path_.c_str());
}

ExchangeServer::Reply FdChannel::Answer(const std::string& ticket,
                                        const ExchangeServer::Peer& peer) {
  ExchangeServer::Reply reply;
  if (ticket.size() != shared::kTicketBytes || !peer.uid) {
    reply.bytes = EncodeReply(BadTicket(ticket.size()));
    return reply;
  }
  PeerIdentity identity;
  identity.uid = *peer.uid;
  identity.gid = peer.gid;
  identity.pid = peer.pid;
  auto descriptor = core_.sharing().Redeem(ticket, identity);
  if (!descriptor.ok()) {
    core_.refusals().Count(descriptor.status());
    reply.bytes = EncodeReply(descriptor.status());
    return reply;
  }
  // Sent with the reply, then closed here: the peer holds its own copy, and
  // if sending fails it cannot leak either.
  reply.bytes = EncodeReply(absl::OkStatus());
  reply.descriptor = *std::move(descriptor);
  return reply;
}

}  // namespace hrx::daemon
