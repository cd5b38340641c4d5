#include "daemon/backend/remote/frame_io.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace hrx::backend::remote {

FrameWriter::FrameWriter(int socket) : socket_(socket) {
  thread_ = std::thread([this] { Run(); });
}

FrameWriter::~FrameWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

FrameWriter::Frame FrameWriter::Encode(
    const google::protobuf::MessageLite& message) {
  Frame frame;
  const uint32_t size = static_cast<uint32_t>(message.ByteSizeLong());
  frame.bytes.resize(sizeof(size) + size);
  std::memcpy(frame.bytes.data(), &size, sizeof(size));
  message.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(frame.bytes.data() + sizeof(size)));
  return frame;
}

void FrameWriter::Send(const google::protobuf::MessageLite& message,
                       shared::UniqueFd fd) {
  Frame frame = Encode(message);
  frame.fd = std::move(fd);
  Enqueue(std::move(frame), /*first=*/false);
}

void FrameWriter::SendFirst(const google::protobuf::MessageLite& message) {
  Enqueue(Encode(message), /*first=*/true);
}

void FrameWriter::Enqueue(Frame frame, bool first) {
  absl::MutexLock lock(&mu_);
  if (!healthy_) return;
  // Nothing ahead of it: written from here if the socket takes it now,
  // which saves a wake of the writer thread on every round trip. What the
  // socket cannot take at once is left to the thread (a caller never waits).
  if (queue_.empty() && !writing_) {
    if (!Write(frame, MSG_DONTWAIT)) {
      healthy_ = false;
      return;
    }
    if (frame.sent == frame.bytes.size()) return;
  }
  if (queued_bytes_ + frame.bytes.size() > kMaxQueuedFrameBytes) {
    healthy_ = false;
    queue_.clear();
    shutdown(socket_, SHUT_RDWR);
    return;
  }
  queued_bytes_ += frame.bytes.size();
  // The frame being written is off the queue: the front is the next.
  if (first) {
    queue_.push_front(std::move(frame));
  } else {
    queue_.push_back(std::move(frame));
  }
}

bool FrameWriter::healthy() const {
  absl::MutexLock lock(&mu_);
  return healthy_;
}

void FrameWriter::Run() {
  while (true) {
    Frame frame;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, all sent
      // One frame at a time, so that SendFirst's frame goes next.
      frame = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;  // Send queues behind this frame meanwhile
    }
    const size_t frame_bytes = frame.bytes.size();
    const bool healthy = Write(frame, 0);
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queued_bytes_ -= std::min(queued_bytes_, frame_bytes);
    if (!healthy) {
      healthy_ = false;
      queue_.clear();
      queued_bytes_ = 0;
    }
  }
}

bool FrameWriter::Write(Frame& frame, int flags) {
  while (frame.sent < frame.bytes.size()) {
    iovec part{frame.bytes.data() + frame.sent,
               frame.bytes.size() - frame.sent};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (frame.sent == 0 && frame.fd.valid()) {
      message.msg_control = control;
      message.msg_controllen = sizeof(control);
      cmsghdr* rights = CMSG_FIRSTHDR(&message);
      rights->cmsg_level = SOL_SOCKET;
      rights->cmsg_type = SCM_RIGHTS;
      rights->cmsg_len = CMSG_LEN(sizeof(int));
      const int fd = frame.fd.get();
      std::memcpy(CMSG_DATA(rights), &fd, sizeof(fd));
    }
    const ssize_t n = sendmsg(socket_, &message, MSG_NOSIGNAL | flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Non-blocking and full: the rest is the writer thread's.
      return (flags & MSG_DONTWAIT) != 0 &&
             (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    frame.sent += static_cast<size_t>(n);
    frame.fd.Reset();  // the peer holds its own copy now
  }
  return true;
}

bool FrameReader::ReadFully(char* data, size_t size) {
  size_t got = 0;
  while (got < size) {
    iovec part{data + got, size - got};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(socket_, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr;
         c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
    // A peer sends a descriptor only with a frame that declares it, and
    // each is taken at once: more waiting than that is a flood.
    if ((message.msg_flags & MSG_CTRUNC) != 0 || fds_.size() > kMaxPendingFds) {
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool FrameReader::Next(std::string* bytes) {
  uint32_t size = 0;
  if (!ReadFully(reinterpret_cast<char*>(&size), sizeof(size))) return false;
  if (size > kMaxFrameBytes) return false;
  bytes->resize(size);
  return ReadFully(bytes->data(), size);
}

shared::UniqueFd FrameReader::TakeFd() {
  if (fds_.empty()) return shared::UniqueFd();
  shared::UniqueFd fd = std::move(fds_.front());
  fds_.pop_front();
  return fd;
}

}  // namespace hrx::backend::remote
