#include "daemon/server/ring_registry.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "daemon/server/core_stream_engine.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

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
  if (executor_rings_ != nullptr) {
    // Every tenant's work runs in an executor: so do its rings. Their
    // threads are the executor's (bounded by its task limit), so they are
    // not counted against hrxd's.
    const uint64_t bytes = shared::RingRegionBytes(shared::kRingSubmitBytes,
                                                   shared::kRingCompleteBytes);
    HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                         core_.commands().ReserveSharedBytes(
                             caller.session(), bytes, "open ring"));
    return OpenInExecutor(caller, tenant, std::move(charge), bytes);
  }
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
  HRX_ASSIGN_OR_RETURN(RingRegion region, CreateRingRegion("open ring"));
  auto ring = std::make_unique<RingServer>(
      region.base, region.bytes, [this](RingServer* ended) { Ended(ended); });
  HRX_RETURN_IF_ERROR(ring->PrepareThread());
  // From here, a ring that will not run lets its waiting thread go.
  absl::Cleanup abandon = [&ring] { ring->Abandon(); };
  HRX_ASSIGN_OR_RETURN(StreamInfo stream,
                       core_.commands().CreateStream(caller.session()));
  absl::StatusOr<std::string> ticket =
      core_.sharing().IssueTicket(caller.session(), std::move(region.fd));
  if (!ticket.ok()) {
    core_.commands().DestroyStream(caller.session(), stream.handle,
                                   [](absl::Status) {});
    return ticket.status();
  }
  std::move(abandon).Cancel();
  RingServer* started = ring.get();
  {
    absl::MutexLock lock(&mu_);
    // StopAll may have run since the check above: this ring stops too.
    if (shutting_down_) started->StopForShutdown(HrxdStopping());
    rings_.emplace(started, Entry{std::move(charge), tenant, std::move(ring)});
    started_ring = true;
  }
  started->Run(std::make_shared<CoreStreamEngine>(core_, caller),
               stream.handle);
  return OpenedRing{stream.handle, stream.queue, *std::move(ticket), bytes};
}

absl::StatusOr<OpenedRing> RingRegistry::OpenInExecutor(
    const Caller& caller, const std::string& tenant, ChargeRef charge,
    uint64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return Refusal(Reason::kShuttingDown,
                     "open ring: hrxd is stopping. Fix: reconnect once it "
                     "has restarted.");
    }
  }
  // Counted now; given back when the slot goes (the executor's ring ended,
  // or it never started).
  std::shared_ptr<const void> slot;
  {
    ExecutorRingCounts& counts = *executor_ring_counts_;
    absl::MutexLock lock(&counts.mu);
    auto counted = counts.per_tenant.find(tenant);
    const size_t mine =
        counted == counts.per_tenant.end() ? 0 : counted->second;
    if (mine >= kMaxRingsPerTenant) {
      return Refusal(
          Reason::kTooManyRings,
          absl::StrFormat(
              "open ring: tenant \"%s\" has %u rings open (at most %u); each "
              "is a thread of its executor's. Fix: close streams, or open "
              "this one as a call (Streams.Open; libhrx does so by itself).",
              tenant, mine, kMaxRingsPerTenant));
    }
    ++counts.per_tenant[tenant];
    class Slot {
     public:
      Slot(std::shared_ptr<ExecutorRingCounts> counts, std::string tenant)
          : counts_(std::move(counts)), tenant_(std::move(tenant)) {}
      Slot(const Slot&) = delete;
      Slot& operator=(const Slot&) = delete;
      ~Slot() {
        absl::MutexLock lock(&counts_->mu);
        if (--counts_->per_tenant[tenant_] == 0) {
          counts_->per_tenant.erase(tenant_);
        }
      }

     private:
      const std::shared_ptr<ExecutorRingCounts> counts_;
      const std::string tenant_;
    };
    slot = std::make_shared<const Slot>(executor_ring_counts_, tenant);
  }
  HRX_ASSIGN_OR_RETURN(RingRegion region, CreateRingRegion("open ring"));
  // The executor maps the region itself; hrxd keeps its own mapping only
  // to end the ring for its client if the executor is lost with it.
  absl::Cleanup unmap = [&] { munmap(region.base, region.bytes); };
  HRX_ASSIGN_OR_RETURN(StreamInfo stream,
                       core_.commands().CreateStream(caller.session()));
  absl::Cleanup destroy = [&] {
    core_.commands().DestroyStream(caller.session(), stream.handle,
                                   [](absl::Status) {});
  };
  const std::shared_ptr<backend::remote::ExecutorLink> link =
      executor_rings_->LinkOf(caller.session(), stream.handle);
  if (link == nullptr) {
    return Refusal(Reason::kNotServedByExecutor,
                   "open ring: the stream's queue is not an executor's. "
                   "Fix: report a bug (with --executor_rings every tenant's "
                   "work runs in an executor).");
  }
  shared::UniqueFd copy(fcntl(region.fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) {
    return Refusal(Reason::kDescriptorsExhausted,
                   absl::StrFormat("open ring: hrxd has no descriptor left "
                                   "to hand the region over (%s). Fix: "
                                   "raise hrxd's open-file limit.",
                                   std::strerror(errno)));
  }
  hrx::v1::Handle sealed;
  caller.Seal(stream.handle, &sealed);
  // Handed over before the client can reach the region: the executor reads
  // its layout as hrxd wrote it.
  // From here the handed-over ring owns hrxd's mapping (HandOver unmaps
  // it when it fails).
  std::move(unmap).Cancel();
  HRX_RETURN_IF_ERROR(executor_rings_->HandOver(
      link, caller.session(), sealed, stream.id, std::move(copy), region.base,
      bytes, std::move(charge), std::move(slot)));
  HRX_ASSIGN_OR_RETURN(
      std::string ticket,
      core_.sharing().IssueTicket(caller.session(), std::move(region.fd)));
  std::move(destroy).Cancel();
  return OpenedRing{stream.handle, stream.queue, std::move(ticket), bytes};
}

void RingRegistry::StopAll() {
  if (executor_rings_ != nullptr) executor_rings_->StopAll();
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  // Stopped under the lock: a ring removes itself only through Ended,
  // which takes it.
  for (auto& [ring, entry] : rings_) ring->StopForShutdown(HrxdStopping());
}

void RingRegistry::Shutdown() {
  StopAll();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](absl::flat_hash_map<RingServer*, Entry>* rings) {
          return rings->empty();
        },
        &rings_));
  }
}

size_t RingRegistry::live() const {
  absl::MutexLock lock(&mu_);
  return rings_.size();
}

void RingRegistry::Ended(RingServer* ring) {
  absl::MutexLock lock(&mu_);
  auto it = rings_.find(ring);
  if (it == rings_.end()) return;
  const std::string tenant = it->second.tenant;
  // Destroyed here, under the lock (the ring first, then its charge), so
  // Shutdown's Await sees the ring gone only once it is.
  rings_.erase(it);
  if (--per_tenant_[tenant] == 0) per_tenant_.erase(tenant);
}

}  // namespace hrx::daemon
