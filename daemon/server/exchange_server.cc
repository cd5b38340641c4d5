#include "daemon/server/exchange_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "shared/refusal.h"

namespace hrx::daemon {

struct ExchangeServer::Connection {
  int fd = -1;
  Peer peer;
  absl::Time deadline;
  std::string request;
  bool answered = false;
  Reply reply;
  size_t sent = 0;
};

struct ExchangeServer::State {
  absl::flat_hash_map<int, Connection> connections;
  absl::flat_hash_map<uid_t, size_t> per_uid;
  bool backing_off = false;  // accept failed for want of descriptors
  absl::Time resume_accepting;
};

absl::StatusOr<std::unique_ptr<ExchangeServer>> ExchangeServer::Start(
    int listen_fd, ExchangeLimits limits, Complete complete, Answer answer,
    Timeout timeout) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) {
    const std::string error = std::strerror(errno);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    close(listen_fd);
    return Refusal(Reason::kListenFailed,
                   absl::StrCat("epoll/eventfd: ", error,
                                ". Fix: raise the daemon's open-file limit."));
  }
  fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listen_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &event);
  event.data.fd = wake_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event);
  auto server = std::unique_ptr<ExchangeServer>(new ExchangeServer(
      listen_fd, epoll_fd, wake_fd, limits, std::move(complete),
      std::move(answer), std::move(timeout)));
  server->thread_ = std::thread([raw = server.get()] { raw->Run(); });
  return server;
}

ExchangeServer::ExchangeServer(int listen_fd, int epoll_fd, int wake_fd,
                               ExchangeLimits limits, Complete complete,
                               Answer answer, Timeout timeout)
    : listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd),
      limits_(limits),
      complete_(std::move(complete)),
      answer_(std::move(answer)),
      timeout_(std::move(timeout)),
      state_(std::make_unique<State>()) {}

ExchangeServer::~ExchangeServer() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  for (auto& [fd, connection] : state_->connections) close(fd);
  close(listen_fd_);
  close(epoll_fd_);
  close(wake_fd_);
}

void ExchangeServer::Drop(int fd) {
  auto it = state_->connections.find(fd);
  if (it == state_->connections.end()) return;
  if (it->second.peer.uid) {
    auto count = state_->per_uid.find(*it->second.peer.uid);
    if (count != state_->per_uid.end() && --count->second == 0) {
      state_->per_uid.erase(count);
    }
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  state_->connections.erase(it);
}

void ExchangeServer::AcceptAll() {
  while (true) {
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // Stop polling the listener for a moment instead of spinning on a
        // connection that cannot be accepted.
        state_->backing_off = true;
        state_->resume_accepting = absl::Now() + absl::Milliseconds(100);
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      }
      return;  // EAGAIN: all taken
    }
    Connection connection;
    connection.fd = fd;
    connection.deadline = absl::Now() + limits_.deadline;
    sockaddr_storage address{};
    socklen_t size = sizeof(address);
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
        address.ss_family == AF_UNIX &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0) {
      connection.peer.uid = credentials.uid;
      connection.peer.gid = credentials.gid;
      connection.peer.pid = credentials.pid;  // 0: another PID namespace
    }
    const bool full =
        state_->connections.size() >= limits_.max_connections ||
        (connection.peer.uid &&
         state_->per_uid[*connection.peer.uid] >= limits_.max_per_uid);
    if (full) {
      close(fd);  // the peer sees its connection end; others keep theirs
      continue;
    }
    if (connection.peer.uid) ++state_->per_uid[*connection.peer.uid];
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    state_->connections.emplace(fd, std::move(connection));
  }
}

void ExchangeServer::Respond(Connection& connection, Reply reply) {
  connection.answered = true;
  connection.reply = std::move(reply);
  epoll_event event{};
  event.events = EPOLLOUT;
  event.data.fd = connection.fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, connection.fd, &event);
  OnWritable(connection);
}

void ExchangeServer::OnReadable(Connection& connection) {
  char chunk[512];
  while (connection.request.size() < limits_.max_request_bytes) {
    const size_t room = limits_.max_request_bytes - connection.request.size();
    const ssize_t n = read(connection.fd, chunk, std::min(room, sizeof(chunk)));
    if (n > 0) {
      connection.request.append(chunk, static_cast<size_t>(n));
      if (complete_(connection.request)) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    break;  // end of input or an error: answer what arrived
  }
  Respond(connection, answer_(connection.request, connection.peer));
}

void ExchangeServer::OnWritable(Connection& connection) {
  const int fd = connection.fd;
  std::string& bytes = connection.reply.bytes;
  while (connection.sent < bytes.size()) {
    iovec part{bytes.data() + connection.sent, bytes.size() - connection.sent};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    const int descriptor = connection.reply.descriptor.get();
    if (connection.sent == 0 && descriptor >= 0) {
      message.msg_control = control;
      message.msg_controllen = sizeof(control);
      cmsghdr* rights = CMSG_FIRSTHDR(&message);
      rights->cmsg_level = SOL_SOCKET;
      rights->cmsg_type = SCM_RIGHTS;
      rights->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(rights), &descriptor, sizeof(int));
    }
    const ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      break;
    }
    connection.sent += static_cast<size_t>(n);
    connection.reply.descriptor.Reset();  // the peer holds its own copy now
  }
  Drop(fd);  // sent in full, or the peer is gone
}

void ExchangeServer::Run() {
  epoll_event events[64];
  while (true) {
    // Sleep until the nearest deadline (or the end of an accept back-off).
    absl::Time wake = absl::InfiniteFuture();
    for (const auto& [fd, connection] : state_->connections) {
      wake = std::min(wake, connection.deadline);
    }
    if (state_->backing_off) wake = std::min(wake, state_->resume_accepting);
    const int timeout_ms =
        wake == absl::InfiniteFuture()
            ? -1
            : static_cast<int>(std::max<int64_t>(
                  0, absl::ToInt64Milliseconds(wake - absl::Now()) + 1));
    const int count = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (count < 0 && errno != EINTR) return;
    for (int i = 0; i < std::max(count, 0); ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) return;
      if (fd == listen_fd_) {
        AcceptAll();
        continue;
      }
      auto it = state_->connections.find(fd);
      if (it == state_->connections.end()) continue;
      if (it->second.answered) {
        OnWritable(it->second);
      } else {
        OnReadable(it->second);
      }
    }
    const absl::Time now = absl::Now();
    if (state_->backing_off && now >= state_->resume_accepting) {
      state_->backing_off = false;
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.fd = listen_fd_;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
    }
    std::vector<int> late;
    for (const auto& [fd, connection] : state_->connections) {
      if (now >= connection.deadline) late.push_back(fd);
    }
    for (int fd : late) {
      Connection& connection = state_->connections.at(fd);
      if (!connection.answered && timeout_) {
        // A last word, if the socket takes it at once; then it is closed.
        const std::string words = timeout_(connection.request);
        (void)send(fd, words.data(), words.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      Drop(fd);
    }
  }
}

}  // namespace hrx::daemon
