#include "daemon/stream/ring_server.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/stream/wire_shape.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

absl::Duration ServeSpin() {
  static const absl::Duration spin = std::thread::hardware_concurrency() >= 4
                                         ? kRingServeSpinManyCores
                                         : kRingServeSpin;
  return spin;
}

}  // namespace

absl::StatusOr<RingRegion> CreateRingRegion(std::string_view what) {
  const uint64_t bytes = shared::RingRegionBytes(shared::kRingSubmitBytes,
                                                 shared::kRingCompleteBytes);
  shared::UniqueFd fd(
      memfd_create("hrx-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
          0) {
    return Refusal(Reason::kMemfdFailed,
                   absl::StrFormat("%s: a %u-byte region: %s. Fix: raise "
                                   "hrxd's open-file or memory limits.",
                                   what, bytes, std::strerror(errno)));
  }
  void* base =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Refusal(Reason::kMemfdFailed,
                   absl::StrFormat("%s: mapping a %u-byte region: %s. Fix: "
                                   "raise hrxd's memory limits.",
                                   what, bytes, std::strerror(errno)));
  }
  shared::InitRingRegion(base, shared::kRingSubmitBytes,
                         shared::kRingCompleteBytes);
  return RingRegion{std::move(fd), base, bytes};
}

RingServer::RingServer(void* base, uint64_t bytes, Ended ended)
    : base_(base),
      bytes_(bytes),
      ended_callback_(std::move(ended)),
      // The region's creator wrote the header: its layout is trusted.
      reader_(shared::SubmitReader(base_), shared::kMaxRingMessageBytes),
      writer_(shared::CompleteWriter(base_)) {}

RingServer::~RingServer() { munmap(base_, bytes_); }

absl::Status RingServer::PrepareThread() {
  try {
    thread_ = std::thread([this] {
      go_.WaitForNotification();
      if (!abandoned_) Serve();
    });
  } catch (const std::system_error& error) {
    return Refusal(
        Reason::kTooManyRings,
        absl::StrFormat("open ring: hrxd could not start the ring's thread "
                        "(%s). Fix: use Streams.Open (libhrx does so by "
                        "itself), or close other rings.",
                        error.what()));
  }
  return absl::OkStatus();
}

void RingServer::Abandon() {
  abandoned_ = true;
  go_.Notify();
  thread_.join();
}

void RingServer::Run(std::shared_ptr<StreamEngine> engine, uint64_t stream) {
  Start(std::move(engine), stream);
  go_.Notify();
  thread_.detach();  // it ends by handing the ring back to its owner
}

void RingServer::Stop(const absl::Status& tell) {
  if (!tell.ok()) Finish(tell);
  stop_requested_.store(true);
  Wake();
}

void RingServer::StopForShutdown(const absl::Status& tell) {
  LeaveStreamAtEnd();
  Stop(tell);
}

absl::Status HrxdStopping() {
  return Refusal(Reason::kShuttingDown,
                 "hrxd is stopping. Fix: reconnect once it has restarted.");
}

void FinishRingRegion(void* base, const absl::Status& status) {
  auto& header = *static_cast<shared::RingHeader*>(base);
  uint32_t unclaimed = 0;
  if (header.finished.load() != 0 ||
      !header.finish_claimed.compare_exchange_strong(unclaimed, 1)) {
    return;  // ended, or being ended, by the other writer
  }
  const absl::string_view message = status.message();
  const size_t bytes =
      std::min<size_t>(message.size(), shared::kRingFinishMessageBytes);
  if (bytes > 0) std::memcpy(header.finish_message, message.data(), bytes);
  header.finish_message_bytes = static_cast<uint32_t>(bytes);
  header.finish_code.store(static_cast<int32_t>(status.code()));
  header.finished.store(1);
  shared::RingDoorbell(header.client_bell);
}

void RingServer::Finish(const absl::Status& status) {
  if (finish_told_.exchange(true)) return;
  FinishRingRegion(base_, status);
}

void RingServer::Serve() {
  absl::Time last_work = absl::Now();
  absl::Time last_check = last_work;
  int idle_wakes = 0;  // wake-ups in a row that found nothing to do
  while (!ended_.load()) {
    const uint32_t seen =
        header().daemon_bell.bell.load(std::memory_order_seq_cst);
    const absl::Time now = absl::Now();
    if (now - last_check >= kRingLivenessInterval) {
      // Busy or idle: a ring whose session ended stops (whoever still
      // writes to the region).
      last_check = now;
      // A session ended by someone else (an eviction, a lost executor) is
      // buried with why: its client hears that with the end. One its client
      // closed ends the ring as the client's own close would.
      if (absl::Status found = engine()->SessionStatus(); !found.ok()) {
        const bool buried = ReasonOf(found) != Reason::kStaleHandle &&
                            ReasonOf(found) != Reason::kUnknownHandle;
        Stop(buried ? found : absl::OkStatus());
      }
    }
    if (ServeOnce()) {
      last_work = absl::Now();
      idle_wakes = 0;
      continue;
    }
    if (now - last_work < ServeSpin()) {
      // Polling, but yielding: the work the client waits for may need this
      // core (an executor, a queue's thread) more than the poll does. The
      // queue's completions are polled too: a reply the client spins for
      // is then written from here, with no thread woken in between.
      // Work it retires counts as work: the client's next request, sent
      // on the reply, is then caught by the spin rather than a wake-up.
      if (PollProgress()) last_work = absl::Now();
      sched_yield();
      continue;
    }
    // A client that rings without giving work (or scribbles the bell) gets
    // slower answers, never a spinning thread.
    if (idle_wakes > kRingIdleWakesBeforeBackoff) {
      absl::SleepFor(kRingIdleBackoff);
    }
    shared::WaitOnDoorbell(header().daemon_bell, seen, kRingLivenessInterval);
    ++idle_wakes;
  }
  // End ran with the conversation's lock held, perhaps on another thread:
  // that thread is out of it once the lock is free again.
  AwaitQuiet();
  // A copy: the owner may destroy this ring, and its member, from inside.
  const Ended ended = ended_callback_;
  ended(this);
}

bool RingServer::ServeOnce() {
  // Progress is judged by this side's own positions, never by what the
  // client can write into the region.
  bool progress = false;
  bool written = false;  // a pending reply went out whole
  bool dropped = false;  // a pending reply never will
  absl::Status broken;
  const bool stopping = stop_requested_.load();
  {
    absl::MutexLock lock(&write_mu_);
    if (write_pending_ && (write_broken_ || stopping)) {
      write_pending_ = false;
      dropped = true;
    } else if (write_pending_) {
      // A reply larger than the free space, continued as the client reads.
      const uint64_t left = writer_.unsent();
      absl::StatusOr<bool> done = writer_.Continue();
      if (!done.ok()) {
        write_broken_ = true;
        broken_ = done.status();
        write_pending_ = false;
        dropped = true;
      } else {
        progress = writer_.unsent() != left;
        if (*done) {
          write_pending_ = false;
          written = true;
        }
      }
    }
    if (stopping) write_broken_ = true;  // nothing more goes out
    if (!broken_.ok()) broken = std::exchange(broken_, absl::OkStatus());
  }
  if (progress || written) shared::RingDoorbell(header().client_bell);
  if (written) OnWritten(true);
  if (dropped) OnWritten(false);
  if (!requests_ended_ && (!broken.ok() || stopping)) {
    requests_ended_ = true;
    want_read_.store(false);
    if (!broken.ok()) {
      OnBroken(broken);
    } else {
      OnCancelled();
      OnRequestsEnded();
    }
    return true;
  }
  if (!want_read_.load() || requests_ended_) {
    return progress || written || dropped;
  }
  const uint64_t read_before = reader_.position();
  absl::StatusOr<bool> got = reader_.Next(&message_);
  if (reader_.position() != read_before) {
    shared::RingDoorbell(header().client_bell);  // space for its next
    progress = true;
  }
  if (!got.ok()) {
    want_read_.store(false);
    requests_ended_ = true;
    OnBroken(got.status());
    return true;
  }
  if (*got) {
    want_read_.store(false);
    request().Clear();
    const absl::Status parsed = ParseChecked(message_, &request());
    message_.clear();
    // A large message's buffer does not stay with the ring.
    if (message_.capacity() > kRingKeptMessageBytes) message_.shrink_to_fit();
    OnRequest(parsed);
    return true;
  }
  if (header().client_closed.load() != 0) {
    if (!reader_.in_message()) {
      // The client's half-close, once everything it wrote was read.
      want_read_.store(false);
      requests_ended_ = true;
      OnRequestsEnded();
      return true;
    }
    // Closed in the middle of a message: what it wrote before closing is
    // all there will be (it closes after writing), so the rest never comes.
    const uint64_t written = header().submit_written.value.load();
    if (written <= reader_.position()) {
      want_read_.store(false);
      requests_ended_ = true;
      OnBroken(Refusal(
          Reason::kRingBroken,
          absl::StrFormat("the stream's shared ring is corrupt: the client "
                          "closed it in the middle of a message (%u bytes "
                          "written). Fix: do not write the ring except "
                          "through libhrx; open a new stream.",
                          written)));
      return true;
    }
  }
  return progress;
}

void RingServer::ReadNext() {
  want_read_.store(true);
  Wake();
}

bool RingServer::WriteNext(const hrx::v1::StreamReply& reply) {
  std::string wire = reply.SerializeAsString();
  bool done = true;
  bool serve = false;  // the serving thread has to act on it
  {
    absl::MutexLock lock(&write_mu_);
    // Dropped: a broken ring or a stopping one has no reader for it.
    if (write_broken_ || stop_requested_.load()) return true;
    absl::StatusOr<bool> written = writer_.Start(std::move(wire));
    if (!written.ok()) {
      write_broken_ = true;
      broken_ = written.status();
      serve = true;
    } else if (!*written) {
      write_pending_ = true;
      done = false;
      serve = true;
    }
  }
  shared::RingDoorbell(header().client_bell);
  if (serve) Wake();
  return done;
}

void RingServer::End(const absl::Status& status) {
  Finish(status);
  ended_.store(true);
  Wake();
}

}  // namespace hrx::daemon
