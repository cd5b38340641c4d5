#include "client/internal/ring_call.h"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/fd_channel.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::client::internal {
namespace {

absl::Status Unavailable(std::string detail) {
  return Refusal(Reason::kRingUnavailable,
                 absl::StrCat(detail,
                              " Fix: check hrxd's memory limits, or use the "
                              "gRPC transport (HRX_TRANSPORT=grpc)."));
}

absl::Duration Spin() {
  static const absl::Duration spin = std::thread::hardware_concurrency() >= 4
                                         ? kRingClientSpinManyCores
                                         : kRingClientSpin;
  return spin;
}

bool Exited(const shared::UniqueFd& pidfd) {
  if (!pidfd.valid()) return false;
  pollfd watch{pidfd.get(), POLLIN, 0};
  return poll(&watch, 1, 0) == 1;
}

}  // namespace

absl::StatusOr<RingCall::Opened> RingCall::Open(Connection& connection,
                                                absl::Time deadline) {
  auto context = connection.Context(deadline);
  hrx::v1::OpenRingRequest request;
  hrx::v1::OpenRingResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.streams().OpenRing(context.get(), request, &response),
      "opening a ring"));
  pid_t daemon_pid = 0;
  HRX_ASSIGN_OR_RETURN(shared::UniqueFd fd,
                       RedeemTicket(connection.fd_socket(), response.ticket(),
                                    deadline, &daemon_pid));
  const uint64_t bytes = response.region_bytes();
  struct stat about {};
  if (fstat(fd.get(), &about) != 0 ||
      static_cast<uint64_t>(about.st_size) != bytes) {
    return Unavailable(
        absl::StrFormat("the ring region is %d bytes, the daemon said %u.",
                        static_cast<int64_t>(about.st_size), bytes));
  }
  void* base =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Unavailable(absl::StrFormat("mapping the %u-byte ring region: %s.",
                                       bytes, std::strerror(errno)));
  }
  if (absl::Status valid = shared::CheckRingRegion(base, bytes); !valid.ok()) {
    munmap(base, bytes);
    return valid;
  }
  // hrxd's process, watched between sleeps: without it a wait on a dead
  // daemon could last forever, so no pidfd (hrxd in another PID namespace,
  // a kernel without pidfd_open) means no ring (kAuto takes the call).
  shared::UniqueFd pidfd(
      daemon_pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, daemon_pid, 0))
                     : -1);
  if (!pidfd.valid()) {
    munmap(base, bytes);
    return Unavailable(absl::StrFormat(
        "hrxd's process (pid %d as the side channel reports it) cannot be "
        "watched with a pidfd, so a wait on the ring could outlive it.",
        daemon_pid));
  }
  Opened opened;
  opened.call.reset(new RingCall(base, bytes, std::move(pidfd)));
  opened.stream = response.stream();
  opened.queue = response.queue();
  return opened;
}

RingCall::RingCall(void* base, uint64_t bytes, shared::UniqueFd daemon)
    : base_(base),
      bytes_(bytes),
      daemon_(std::move(daemon)),
      writer_(shared::SubmitWriter(base)),
      reader_(shared::CompleteReader(base), shared::kMaxRingMessageBytes) {}

RingCall::~RingCall() { munmap(base_, bytes_); }

template <typename Ready>
RingCall::Wake RingCall::WaitFor(Ready ready, absl::Time deadline) {
  const absl::Time spin_until = absl::Now() + Spin();
  while (true) {
    const uint32_t seen =
        header().client_bell.bell.load(std::memory_order_seq_cst);
    if (ready()) return Wake::kReady;
    if (OverLocked()) return ready() ? Wake::kReady : Wake::kOver;
    const absl::Time now = absl::Now();
    if (now >= deadline) return Wake::kDeadline;
    if (now < spin_until) {
      sched_yield();  // the daemon may need this core to answer
      continue;
    }
    const absl::Duration slice = std::min(deadline - now, kRingClientSlice);
    shared::WaitOnDoorbell(header().client_bell, seen, slice);
    if (Exited(daemon_)) {
      is_over_ = true;
      over_ = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           "hrxd exited while the stream's ring was open");
    }
  }
}

bool RingCall::OverLocked() {
  if (is_over_) return true;
  if (header().finished.load(std::memory_order_acquire) == 0) return false;
  is_over_ = true;
  const int32_t code = header().finish_code.load();
  // hrxd's words for the end (a copy: the region is shared), bounded
  // whatever the header says.
  const uint32_t bytes =
      std::min(header().finish_message_bytes, shared::kRingFinishMessageBytes);
  std::string message(header().finish_message, bytes);
  if (message.empty()) {
    message =
        absl::StrFormat("hrxd ended the stream's ring (status code %d)", code);
  }
  over_ = code == 0 ? grpc::Status::OK
                    : grpc::Status(static_cast<grpc::StatusCode>(code),
                                   std::move(message));
  return true;
}

bool RingCall::DrainRepliesLocked() {
  const uint64_t read_before = reader_.position();
  while (true) {
    absl::StatusOr<bool> got = reader_.Next(&message_);
    if (!got.ok()) {
      is_over_ = true;
      over_ = grpc::Status(grpc::StatusCode::DATA_LOSS,
                           std::string(got.status().message()));
      return false;
    }
    if (!*got) break;
    hrx::v1::StreamReply reply;
    if (!reply.ParseFromString(message_)) {
      is_over_ = true;
      over_ = grpc::Status(grpc::StatusCode::DATA_LOSS,
                           "a reply on the stream's ring does not parse");
      return false;
    }
    if (abandoned_.erase(reply.token()) != 0) continue;
    const uint64_t token = reply.token();
    replies_[token] = std::move(reply);
  }
  // Space for a reply hrxd could not fit (even part of one).
  if (reader_.position() != read_before) {
    shared::RingDoorbell(header().daemon_bell);
  }
  return true;
}

StreamTransport::Outcome RingCall::Write(hrx::v1::StreamRequest request,
                                         absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (is_over_) return Outcome::kCallOver;
  bool broken = false;
  // Pushes what fits of the message in progress; true once all of it is in.
  auto pushed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t left = writer_.unsent();
    absl::StatusOr<bool> done = writer_.Continue();
    if (!done.ok()) {
      broken = true;
      is_over_ = true;
      over_ = grpc::Status(grpc::StatusCode::DATA_LOSS,
                           std::string(done.status().message()));
      return true;
    }
    if (writer_.unsent() != left) shared::RingDoorbell(header().daemon_bell);
    return *done;
  };
  // A message left unfinished by an earlier deadline goes first.
  if (!writer_.idle()) {
    const Wake wake = WaitFor(pushed, deadline);
    if (wake == Wake::kDeadline) return Outcome::kDeadline;
    if (wake == Wake::kOver || broken) return Outcome::kCallOver;
  }
  absl::StatusOr<bool> started = writer_.Start(request.SerializeAsString());
  if (!started.ok()) {
    is_over_ = true;
    over_ = grpc::Status(grpc::StatusCode::DATA_LOSS,
                         std::string(started.status().message()));
    return Outcome::kCallOver;
  }
  shared::RingDoorbell(header().daemon_bell);
  if (*started) return Outcome::kDone;
  const Wake wake = WaitFor(pushed, deadline);
  if (wake == Wake::kDeadline) return Outcome::kDeadline;
  if (wake == Wake::kOver || broken) return Outcome::kCallOver;
  return Outcome::kDone;
}

StreamTransport::Outcome RingCall::Await(uint64_t token, absl::Time deadline,
                                         hrx::v1::StreamReply* out) {
  absl::MutexLock lock(&mu_);
  auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!DrainRepliesLocked()) return false;
    return replies_.contains(token);
  };
  switch (WaitFor(arrived, deadline)) {
    case Wake::kReady: {
      auto it = replies_.find(token);
      *out = std::move(it->second);
      replies_.erase(it);
      return Outcome::kDone;
    }
    case Wake::kDeadline:
      abandoned_.insert(token);
      return Outcome::kDeadline;
    case Wake::kOver:
      break;
  }
  return Outcome::kCallOver;
}

grpc::Status RingCall::Close(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!is_over_) {
    auto pushed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const uint64_t left = writer_.unsent();
      absl::StatusOr<bool> done = writer_.Continue();
      if (writer_.unsent() != left) shared::RingDoorbell(header().daemon_bell);
      return !done.ok() || *done;
    };
    if (WaitFor(pushed, deadline) == Wake::kReady) {
      header().client_closed.store(1, std::memory_order_release);
      shared::RingDoorbell(header().daemon_bell);
      // Replies still coming are taken (and dropped) so that hrxd is never
      // stuck writing one; the end comes once the stream is drained.
      auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        DrainRepliesLocked();
        replies_.clear();
        return false;
      };
      (void)WaitFor(ended, deadline);
    }
  }
  if (!is_over_) {
    return grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        "the stream's ring did not end by the deadline (its work still runs)");
  }
  return over_;
}

}  // namespace hrx::client::internal
