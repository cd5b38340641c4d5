// A small request-and-reply server for the daemon's side listeners (the
// descriptor side channel, the metrics endpoint): one epoll thread serves
// many connections at once, each with a deadline for the whole exchange
// (read the request, send the reply), so a silent or dripping peer holds
// only its own connection, and only until its deadline. Connections past
// the caps (in all, and per uid on Unix sockets) are closed at once.
//
// Thread-safe. The handler runs on the server's thread.
#ifndef HRX_DAEMON_SERVER_EXCHANGE_SERVER_H_
#define HRX_DAEMON_SERVER_EXCHANGE_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

struct ExchangeLimits {
  // The whole exchange, from accept to the reply's last byte.
  absl::Duration deadline = absl::Seconds(2);
  size_t max_connections = 256;  // open at once, in all
  size_t max_per_uid = 16;       // open at once per peer uid (Unix sockets)
  size_t max_request_bytes = 1024;
};

class ExchangeServer {
 public:
  struct Peer {
    // The kernel's credentials of a Unix-socket peer; nullopt on TCP.
    std::optional<uid_t> uid;
    gid_t gid = 0;
    pid_t pid = 0;
  };
  struct Reply {
    std::string bytes;
    shared::UniqueFd descriptor;  // passed with the first byte (SCM_RIGHTS)
  };
  // Whether `request` (the bytes so far) is whole; once it is, or once
  // max_request_bytes arrived, `answer` gets it.
  using Complete = std::function<bool(const std::string& request)>;
  using Answer = std::function<Reply(const std::string& request, const Peer&)>;
  // Answers a request that could not be completed in time, given what
  // arrived of it (the answer may be empty).
  using Timeout = std::function<std::string(const std::string& partial)>;

  // Takes ownership of `listen_fd` and serves it until destroyed.
  static absl::StatusOr<std::unique_ptr<ExchangeServer>> Start(
      int listen_fd, ExchangeLimits limits, Complete complete, Answer answer,
      Timeout timeout);
  ~ExchangeServer();  // stops, closes every connection
  ExchangeServer(const ExchangeServer&) = delete;
  ExchangeServer& operator=(const ExchangeServer&) = delete;

 private:
  struct Connection;
  ExchangeServer(int listen_fd, int epoll_fd, int wake_fd,
                 ExchangeLimits limits, Complete complete, Answer answer,
                 Timeout timeout);
  void Run();
  void AcceptAll();
  void OnReadable(Connection& connection);
  void OnWritable(Connection& connection);
  void Respond(Connection& connection, Reply reply);
  void Drop(int fd);

  const int listen_fd_;
  const int epoll_fd_;
  const int wake_fd_;
  const ExchangeLimits limits_;
  const Complete complete_;
  const Answer answer_;
  const Timeout timeout_;
  // Touched only by the server's thread.
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_EXCHANGE_SERVER_H_
