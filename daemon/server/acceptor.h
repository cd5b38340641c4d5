// Accepts connections on a listening socket, on a thread of its own, and
// hands each one to a handler. Shared by the daemon's own listeners (the
// gRPC socket, the descriptor side channel, the metrics endpoint).
#ifndef HRX_DAEMON_SERVER_ACCEPTOR_H_
#define HRX_DAEMON_SERVER_ACCEPTOR_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace hrx::daemon {

class Acceptor {
 public:
  // How long the loop pauses when accept fails for want of descriptors or
  // memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), instead of spinning.
  static constexpr int kBackoffMs = 100;

  // Called on the acceptor's thread with each accepted descriptor, which
  // the handler owns from then on.
  using Handler = std::function<void(int fd)>;

  // Takes ownership of `listen_fd`, a listening socket, and starts accepting.
  static absl::StatusOr<std::unique_ptr<Acceptor>> Start(int listen_fd,
                                                         Handler handler);
  // Stop(), then closes the listening socket.
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // Stops accepting and waits for the thread; idempotent.
  void Stop();

 private:
  Acceptor(int listen_fd, int wake_fd, Handler handler);
  void Loop();

  const int listen_fd_;
  const int wake_fd_;  // an eventfd that ends the loop
  const Handler handler_;
  std::thread thread_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_ACCEPTOR_H_
