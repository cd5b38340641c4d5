// A ring opened and driven by hand, for tests that treat the ring as
// hostile input or look at what serves it.
#ifndef HRX_TESTS_RAW_RING_H_
#define HRX_TESTS_RAW_RING_H_

#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "client/internal/fd_channel.h"
#include "gtest/gtest.h"
#include "shared/shm_ring.h"
#include "shared/unique_fd.h"
#include "tests/raw_session.h"

namespace hrx::testing {

// How long a step may hang before the test gives up (a hang limit, never
// a measurement).
inline constexpr absl::Duration kRawRingHangLimit = absl::Seconds(20);

// A ring opened and driven by hand.
class RawRing {
 public:
  explicit RawRing(RawSession& session) {
    auto context = session.Context();
    hrx::v1::OpenRingRequest request;
    status_ = shared::FromGrpcStatus(
        session.streams->OpenRing(context.get(), request, &opened_));
    if (!status_.ok()) return;
    auto fd = client::internal::RedeemTicket(
        opened_.fd_socket(), opened_.ticket(), absl::Now() + kRawRingHangLimit);
    if (!fd.ok()) {
      status_ = fd.status();
      return;
    }
    fd_ = *std::move(fd);
    bytes_ = opened_.region_bytes();
    base_ =
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (base_ == MAP_FAILED) {
      status_ = absl::InternalError("mmap");
      return;
    }
    auto* data = static_cast<uint8_t*>(base_);
    writer_.emplace(
        shared::PipeWriter(data + header().submit_offset, header().submit_bytes,
                           &header().submit_written, &header().submit_read));
    reader_.emplace(
        shared::PipeReader(data + header().complete_offset,
                           header().complete_bytes, &header().complete_written,
                           &header().complete_read),
        shared::kMaxRingMessageBytes);
  }
  ~RawRing() {
    if (base_ != nullptr && base_ != MAP_FAILED) munmap(base_, bytes_);
  }

  const absl::Status& status() const { return status_; }
  const hrx::v1::Handle& stream() const { return opened_.stream(); }
  shared::RingHeader& header() {
    return *static_cast<shared::RingHeader*>(base_);
  }
  int fd() const { return fd_.get(); }

  // Writes raw bytes as one framed message.
  void SendBytes(std::string bytes) {
    absl::StatusOr<bool> done = writer_->Start(std::move(bytes));
    const absl::Time limit = absl::Now() + kRawRingHangLimit;
    while (done.ok() && !*done && absl::Now() < limit)
      done = writer_->Continue();
    ASSERT_TRUE(done.ok() && *done) << done.status();
    shared::RingDoorbell(header().daemon_bell);
  }
  void Send(const hrx::v1::StreamRequest& request) {
    SendBytes(request.SerializeAsString());
  }
  // The next reply, or nothing once the ring has ended.
  std::optional<hrx::v1::StreamReply> Receive() {
    std::string message;
    const absl::Time limit = absl::Now() + kRawRingHangLimit;
    while (absl::Now() < limit) {
      absl::StatusOr<bool> got = reader_->Next(&message);
      if (!got.ok()) return std::nullopt;
      if (*got) {
        hrx::v1::StreamReply reply;
        if (!reply.ParseFromString(message)) return std::nullopt;
        return reply;
      }
      if (header().finished.load() != 0) return std::nullopt;
      usleep(100);
    }
    return std::nullopt;
  }
  // Waits (up to the hang limit) for hrxd to end the ring; its status code.
  std::optional<int> AwaitEnd() {
    const absl::Time limit = absl::Now() + kRawRingHangLimit;
    while (absl::Now() < limit) {
      if (header().finished.load() != 0) return header().finish_code.load();
      usleep(1000);
    }
    return std::nullopt;
  }

 private:
  absl::Status status_;
  hrx::v1::OpenRingResponse opened_;
  shared::UniqueFd fd_;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::optional<shared::MessageWriter> writer_;
  std::optional<shared::MessageReader> reader_;
};

inline hrx::v1::StreamRequest Sync(uint64_t token) {
  hrx::v1::StreamRequest request;
  request.set_token(token);
  request.mutable_sync();
  return request;
}

inline bool ProcessMapsRing() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("hrx-ring") != std::string::npos) return true;
  }
  return false;
}

}  // namespace hrx::testing

#endif  // HRX_TESTS_RAW_RING_H_
