#include "daemon/server/ring_stream.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "daemon/server/wire_shape.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

absl::Duration ServeSpin() {
  static const absl::Duration spin = std::thread::hardware_concurrency() >= 4
                                         ? kRingServeSpinManyCores
                                         : kRingServeSpin;
  return spin;
}

struct Mapped {
  shared::UniqueFd fd;
  void* base = nullptr;
};

// A sealed memfd of `bytes`, mapped: the client can write its pages but
// cannot shrink it under hrxd's mapping.
absl::StatusOr<Mapped> MapRegion(uint64_t bytes) {
  shared::UniqueFd fd(
      memfd_create("hrx-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
          0) {
    return Refusal(Reason::kMemfdFailed,
                   absl::StrFormat("open ring: a %u-byte region: %s. Fix: "
                                   "raise hrxd's open-file or memory limits.",
                                   bytes, std::strerror(errno)));
  }
  void* base =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    return Refusal(Reason::kMemfdFailed,
                   absl::StrFormat("open ring: mapping a %u-byte region: %s. "
                                   "Fix: raise hrxd's memory limits.",
                                   bytes, std::strerror(errno)));
  }
  return Mapped{std::move(fd), base};
}

}  // namespace

// --- RingRegistry -----------------------------------------------------------

RingRegistry::~RingRegistry() { Shutdown(); }

absl::StatusOr<OpenedRing> RingRegistry::Open(const Caller& caller,
                                              const PeerIdentity& peer) {
  if (peer.pid <= 0) {
    return Refusal(
        Reason::kPeerNotVisible,
        "open ring: the caller has no process hrxd can see (a remote "
        "client, or another PID namespace), so no region can be handed to "
        "it. Fix: use Streams.Open (libhrx does so by itself).");
  }
  auto session = core_.sessions().Find(caller.session());
  if (!session.ok()) return session.status();
  const std::string tenant = (*session)->tenant->name();
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return Refusal(Reason::kShuttingDown,
                     "open ring: hrxd is stopping. Fix: reconnect once it "
                     "has restarted.");
    }
    // Counted now (each ring is a thread of hrxd's); given back by Ended,
    // or below if the ring does not start.
    auto counted = per_tenant_.find(tenant);
    const size_t mine = counted == per_tenant_.end() ? 0 : counted->second;
    if (mine >= kMaxRingsPerTenant || rings_.size() + reserved_ >= kMaxRings) {
      return Refusal(
          Reason::kTooManyRings,
          absl::StrFormat(
              "open ring: tenant \"%s\" has %u rings open (at most %u), "
              "hrxd %u (at most %u); each is a thread of hrxd's. Fix: close "
              "streams, or open this one as a call (Streams.Open; libhrx "
              "does so by itself).",
              tenant, mine, kMaxRingsPerTenant, rings_.size() + reserved_,
              kMaxRings));
    }
    ++per_tenant_[tenant];
    ++reserved_;
  }
  // Whatever happens below, the reservation becomes a ring or goes.
  bool started_ring = false;
  absl::Cleanup unreserve = [&] {
    absl::MutexLock lock(&mu_);
    --reserved_;
    if (!started_ring && --per_tenant_[tenant] == 0) per_tenant_.erase(tenant);
  };
  const uint64_t bytes = shared::RingRegionBytes(shared::kRingSubmitBytes,
                                                 shared::kRingCompleteBytes);
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       core_.commands().ReserveSharedBytes(caller.session(),
                                                           bytes, "open ring"));
  HRX_ASSIGN_OR_RETURN(Mapped mapped, MapRegion(bytes));
  shared::InitRingRegion(mapped.base, shared::kRingSubmitBytes,
                         shared::kRingCompleteBytes);
  std::unique_ptr<RingStream> ring(
      new RingStream(core_, *this, RingStream::Region{mapped.base, bytes},
                     std::move(charge), tenant));
  HRX_RETURN_IF_ERROR(ring->PrepareThread());
  // From here, a ring that will not run lets its waiting thread go.
  absl::Cleanup abandon = [&ring] { ring->Abandon(); };
  HRX_ASSIGN_OR_RETURN(StreamInfo stream,
                       core_.commands().CreateStream(caller.session()));
  absl::StatusOr<std::string> ticket =
      core_.sharing().IssueTicket(caller.session(), std::move(mapped.fd));
  if (!ticket.ok()) {
    core_.commands().DestroyStream(caller.session(), stream.handle,
                                   [](absl::Status) {});
    return ticket.status();
  }
  std::move(abandon).Cancel();
  RingStream* started = ring.get();
  {
    absl::MutexLock lock(&mu_);
    // StopAll may have run since the check above: this ring stops too.
    if (shutting_down_) started->StopForShutdown();
    rings_.emplace(started, std::move(ring));
    started_ring = true;
  }
  started->Run(caller, stream.handle);
  return OpenedRing{stream.handle, stream.queue, *std::move(ticket), bytes};
}

void RingRegistry::StopAll() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  // Stopped under the lock: a ring removes itself only through Ended,
  // which takes it.
  for (auto& [ring, owned] : rings_) ring->StopForShutdown();
}

void RingRegistry::Shutdown() {
  StopAll();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](absl::flat_hash_map<RingStream*, std::unique_ptr<RingStream>>*
                rings) { return rings->empty(); },
        &rings_));
  }
}

size_t RingRegistry::live() const {
  absl::MutexLock lock(&mu_);
  return rings_.size();
}

void RingRegistry::Ended(RingStream* ring) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<RingStream> ended;  // destroyed first, under the lock
  auto it = rings_.find(ring);
  if (it == rings_.end()) return;
  ended = std::move(it->second);
  rings_.erase(it);
  if (--per_tenant_[ring->tenant_] == 0) per_tenant_.erase(ring->tenant_);
  // `ended` is destroyed here, under the lock, so Shutdown's Await sees
  // the ring gone only once it is.
}

// --- RingStream -------------------------------------------------------------

RingStream::RingStream(Core& core, RingRegistry& registry, Region region,
                       ChargeRef charge, std::string tenant)
    : StreamConversation(core),
      registry_(registry),
      region_(std::move(region)),
      charge_(std::move(charge)),
      tenant_(std::move(tenant)),
      // hrxd wrote the header: its own copy of the layout is trusted.
      reader_(shared::SubmitReader(region_.base), shared::kMaxRingMessageBytes),
      writer_(shared::CompleteWriter(region_.base)) {}

RingStream::~RingStream() { munmap(region_.base, region_.bytes); }

absl::Status RingStream::PrepareThread() {
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

void RingStream::Abandon() {
  abandoned_ = true;
  go_.Notify();
  thread_.join();
}

void RingStream::Run(const Caller& caller, uint64_t stream) {
  Start(caller, stream);
  go_.Notify();
  thread_.detach();  // it ends by handing the ring back to the registry
}

void RingStream::Stop(const absl::Status& tell) {
  if (!tell.ok()) Finish(tell);
  stop_requested_.store(true);
  Wake();
}

void RingStream::StopForShutdown() {
  LeaveStreamAtEnd();
  Stop(Refusal(Reason::kShuttingDown,
               "hrxd is stopping. Fix: reconnect once it has restarted."));
}

void RingStream::Finish(const absl::Status& status) {
  if (finish_told_.exchange(true)) return;
  const absl::string_view message = status.message();
  const size_t bytes =
      std::min<size_t>(message.size(), shared::kRingFinishMessageBytes);
  if (bytes > 0) std::memcpy(header().finish_message, message.data(), bytes);
  header().finish_message_bytes = static_cast<uint32_t>(bytes);
  header().finish_code.store(static_cast<int32_t>(status.code()));
  header().finished.store(1);
  shared::RingDoorbell(header().client_bell);
}

void RingStream::Serve() {
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
      if (absl::Status found = core().sessions().Find(session()).status();
          !found.ok()) {
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
      // core (an executor, a queue's thread) more than the poll does.
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
  registry_.Ended(this);  // destroys this
}

bool RingStream::ServeOnce() {
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
  if (header().client_closed.load() != 0 && !reader_.in_message()) {
    // The client's half-close, once everything it wrote was read.
    want_read_.store(false);
    requests_ended_ = true;
    OnRequestsEnded();
    return true;
  }
  return progress;
}

void RingStream::ReadNext() {
  want_read_.store(true);
  Wake();
}

bool RingStream::WriteNext(const hrx::v1::StreamReply& reply) {
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

void RingStream::End(const absl::Status& status) {
  Finish(status);
  ended_.store(true);
  Wake();
}

}  // namespace hrx::daemon
