// The descriptor side channel: a second Unix socket beside the gRPC one
// (gRPC cannot carry file descriptors). A client connects, sends a 16-byte
// ticket from Buffers.Export, and receives a reply header, a message and —
// when the ticket is good and the peer's credentials (SO_PEERCRED) are the
// exporting process's — the descriptor, over SCM_RIGHTS. One ticket per
// connection. Many connections are served at once, each with a deadline for
// the whole exchange (kSideChannelDeadline), at most
// kMaxSideChannelConnections in all and kMaxSideChannelConnectionsPerUid per
// uid. Wire format: docs/resident-handles.md.
#ifndef HRX_DAEMON_SERVER_FD_CHANNEL_H_
#define HRX_DAEMON_SERVER_FD_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/core.h"
#include "daemon/server/exchange_server.h"

namespace hrx::daemon {

inline constexpr absl::Duration kSideChannelDeadline = absl::Seconds(2);
inline constexpr size_t kMaxSideChannelConnections = 256;
inline constexpr size_t kMaxSideChannelConnectionsPerUid = 16;

class FdChannel {
 public:
  static absl::StatusOr<std::unique_ptr<FdChannel>> Start(
      const std::string& path, unsigned socket_mode, Core& core);
  ~FdChannel();  // stops and removes the socket

 private:
  FdChannel(std::string path, Core& core);
  ExchangeServer::Reply Answer(const std::string& ticket,
                               const ExchangeServer::Peer& peer);

  const std::string path_;
  Core& core_;
  std::unique_ptr<ExchangeServer> server_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_FD_CHANNEL_H_
