// A move-only owner of a file descriptor: closes it when destroyed, so a
// descriptor moving through several steps cannot leak on any failure path.
// Public because libhrx hands descriptors to callers (Buffer::ExportDmaBuf).
#ifndef HRX_CLIENT_INCLUDE_HRX_UNIQUE_FD_H_
#define HRX_CLIENT_INCLUDE_HRX_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace hrx {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership.
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_UNIQUE_FD_H_
