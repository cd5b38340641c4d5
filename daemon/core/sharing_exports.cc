// Sharing: export tickets, their redemption, and retired descriptors.
#include <sys/random.h>

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/core/descriptor_holds.h"
#include "daemon/core/sharing.h"
#include "shared/quote.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

using backend::MemoryRef;

void Sharing::SweepTicketsLocked(absl::Time now) {
  size_t spent = 0;
  for (auto& [ticket, entry] : tickets_) {
    if (!entry.used && now > entry.deadline) {
      entry.used = true;  // expired: its descriptor and hold go now
      entry.expired = true;
      entry.fd.Reset();
      entry.memory.reset();
      entry.charge.reset();
    }
    if (entry.used) ++spent;
  }
  absl::erase_if(tickets_, [&](const auto& entry) {
    return entry.second.used &&
           (spent > kMaxTicketTombstones ||
            entry.second.deadline + absl::Minutes(1) < now);
  });
}

void Sharing::Retire(ExportEntry entry, const std::string& tenant, pid_t pid) {
  if (entry.tracked) {
    if (ExportDescriptionsGone(*entry.memory)) return;  // released here
    absl::MutexLock lock(&mu_);
    lingering_.push_back(Detached{tenant, std::move(entry)});
    return;
  }
  if (pid <= 0) return;  // nothing to watch: released here
  {
    absl::MutexLock lock(&mu_);
    detached_[pid].push_back(Detached{tenant, std::move(entry)});
  }
  watcher_.Watch(pid);  // at once if it has already exited
}

void Sharing::ProbeLingering() {
  std::vector<Detached> probing;
  {
    absl::MutexLock lock(&mu_);
    probing.swap(lingering_);
  }
  std::vector<Detached> held;
  for (Detached& detached : probing) {
    if (!ExportDescriptionsGone(*detached.entry.memory)) {
      held.push_back(std::move(detached));
    }
  }
  probing.clear();  // the released ones go, outside the lock
  absl::MutexLock lock(&mu_);
  for (Detached& detached : held) lingering_.push_back(std::move(detached));
}

absl::StatusOr<ExportTicket> Sharing::Export(uint64_t session, uint64_t buffer,
                                             backend::ExportKind kind) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  // A mapping writes the memory: observers may not have one.
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "export buffer"));
  // Every descriptor handed out counts until it is released.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      owner->tenant->Reserve(Resource::kExports, 1, "export", owner->Who()));
  MemoryRef memory;
  uint64_t export_id = 0;
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(BufferEntry * entry,
                         owner->buffers.Find(buffer, "export buffer"));
    memory = entry->memory;
    entry->shared_out = true;
    export_id = owner->next_export_id++;
  }
  // Shared memory goes out as a description of its own, so that its last
  // close can be known (descriptor_holds.h).
  const bool tracked = kind == backend::ExportKind::kShm && track_descriptions_;
  shared::UniqueFd fd;
  if (tracked) {
    HRX_ASSIGN_OR_RETURN(fd, OpenExportDescription(*memory));
  } else {
    HRX_ASSIGN_OR_RETURN(int raw_fd, memory->ExportFd(kind));
    fd.Reset(raw_fd);
  }
  std::string ticket(16, '\0');
  HRX_CHECK(getrandom(ticket.data(), ticket.size(), 0) ==
            static_cast<ssize_t>(ticket.size()));
  const absl::Time now = sessions_.clock().Now();
  ExportTicket result{ticket, export_id, memory->size(), 0};
  absl::MutexLock lock(&mu_);
  SweepTicketsLocked(now);
  tickets_[ticket] = TicketEntry{session,
                                 export_id,
                                 std::move(memory),
                                 std::move(fd),
                                 std::move(charge),
                                 now + ticket_lifetime_,
                                 false,
                                 false,
                                 tracked};
  return result;
}

absl::StatusOr<std::string> Sharing::IssueTicket(uint64_t session,
                                                 shared::UniqueFd fd) {
  std::string ticket(16, '\0');
  HRX_CHECK(getrandom(ticket.data(), ticket.size(), 0) ==
            static_cast<ssize_t>(ticket.size()));
  const absl::Time now = sessions_.clock().Now();
  absl::MutexLock lock(&mu_);
  SweepTicketsLocked(now);
  // No memory and no export id: redeeming it records no mapping.
  tickets_[ticket] = TicketEntry{session,       0,       nullptr,
                                 std::move(fd), nullptr, now + ticket_lifetime_,
                                 false,         false,   false};
  return ticket;
}

absl::StatusOr<shared::UniqueFd> Sharing::Redeem(std::string_view ticket,
                                                 const PeerIdentity& peer) {
  if (peer.pid <= 0) {
    // The kernel cannot show this peer's process (another PID namespace):
    // nothing would tell the exporter from another process of its uid.
    return Refusal(
        Reason::kPeerNotVisible,
        absl::StrFormat(
            "redeem: the side channel peer (uid %u) is in a PID "
            "namespace hrxd cannot see, so the ticket's process cannot be "
            "checked. Fix: run hrxd in its clients' PID namespace (or a parent "
            "of it), or move data through Upload and Read instead of mappings.",
            peer.uid));
  }
  uint64_t session = 0;
  uint64_t export_id = 0;
  MemoryRef memory;
  ChargeRef charge;
  bool tracked = false;
  shared::UniqueFd fd;
  {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(std::string(ticket));
    if (it == tickets_.end()) {
      return Refusal(
          Reason::kUnknownTicket,
          "redeem: no such export ticket. Fix: redeem the "
          "ticket Buffers.Export returned, on the side channel it named.");
    }
    TicketEntry& entry = it->second;
    if (entry.used && !entry.expired) {
      return Refusal(
          Reason::kTicketUsed,
          "redeem: the ticket was already redeemed; tickets are "
          "single-use. Fix: call Buffers.Export again for another descriptor.");
    }
    if (entry.expired || sessions_.clock().Now() > entry.deadline) {
      entry.used = true;
      entry.expired = true;
      entry.fd.Reset();
      entry.memory.reset();  // a spent ticket holds nothing
      entry.charge.reset();
      return Refusal(
          Reason::kTicketExpired,
          absl::StrFormat(
              "redeem: the ticket expired %s ago (tickets live "
              "%s). Fix: redeem promptly after Buffers.Export, or export "
              "again.",
              absl::FormatDuration(sessions_.clock().Now() - entry.deadline),
              absl::FormatDuration(ticket_lifetime_)));
    }
    session = entry.session;
    export_id = entry.export_id;
    memory = std::move(entry.memory);  // a spent ticket holds nothing
    charge = std::move(entry.charge);
    tracked = entry.tracked;
    // Checked below, outside this lock; the ticket is spent either way, so a
    // wrong peer cannot probe it twice.
    entry.used = true;
    fd = std::move(entry.fd);
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  const PeerIdentity& opener = owner->identity;
  if (opener.pid != peer.pid || opener.uid != peer.uid) {
    return Refusal(
        Reason::kTicketNotYours,
        absl::StrFormat(
            "redeem: the ticket belongs to a session of %s; "
            "the side channel peer is uid %u, pid %u. Fix: redeem tickets in "
            "the "
            "process that exported them; share buffers with a grant.",
            owner->Who(), peer.uid, peer.pid));
  }
  if (memory == nullptr) return fd;  // a ring region: no mapping to track
  absl::MutexLock lock(&owner->mu);
  owner->exports[export_id] =
      ExportEntry{std::move(memory), std::move(charge), tracked};
  return fd;
}

absl::Status Sharing::ReleaseExport(uint64_t session, uint64_t export_id) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  ExportEntry released;
  {
    absl::MutexLock lock(&owner->mu);
    auto it = owner->exports.find(export_id);
    if (it == owner->exports.end()) {
      return Refusal(
          Reason::kUnknownExport,
          absl::StrFormat("release export %u: this session holds no such "
                          "mapping. Fix: release each mapping once.",
                          export_id));
    }
    released = std::move(it->second);
    owner->exports.erase(it);
  }
  // The client says it is done; the memory goes when its descriptor has.
  Retire(std::move(released), owner->tenant->name(), owner->identity.pid);
  return absl::OkStatus();
}

void Sharing::RetireExports(
    const Session& closed, absl::flat_hash_map<uint64_t, ExportEntry> exports) {
  // Descriptors the process received may still be open or mapped, there or
  // in a process it handed them to: their memory stays charged until they
  // are gone.
  for (auto& [id, entry] : exports) {
    Retire(std::move(entry), closed.tenant->name(), closed.identity.pid);
  }
}

void Sharing::ProcessExited(pid_t pid) {
  std::vector<Detached> released;  // goes outside the lock
  absl::MutexLock lock(&mu_);
  auto it = detached_.find(pid);
  if (it == detached_.end()) return;
  released = std::move(it->second);
  detached_.erase(it);
}

bool Sharing::WaitsFor(pid_t pid) const {
  absl::MutexLock lock(&mu_);
  return detached_.contains(pid);
}

void Sharing::Housekeep(absl::Time now) {
  ProbeLingering();
  absl::MutexLock lock(&mu_);
  SweepTicketsLocked(now);
}

Sharing::Retired Sharing::RetiredExports(const std::string& tenant) const {
  Retired total;
  auto add = [&](const Detached& detached) {
    if (detached.tenant != tenant) return;
    ++total.count;
    total.bytes += detached.entry.memory->size();
  };
  absl::MutexLock lock(&mu_);
  for (const Detached& detached : lingering_) add(detached);
  for (const auto& [pid, list] : detached_) {
    for (const Detached& detached : list) add(detached);
  }
  return total;
}

}  // namespace hrx::daemon
