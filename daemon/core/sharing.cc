// Sharing: construction, grants, and forgetting a closed session.
#include "daemon/core/sharing.h"

#include <sys/random.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/core/descriptor_holds.h"
#include "shared/quote.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

using backend::MemoryRef;

Sharing::Sharing(SessionTable& sessions, ProcessWatcher& watcher,
                 absl::Duration ticket_lifetime)
    : sessions_(sessions),
      watcher_(watcher),
      ticket_lifetime_(ticket_lifetime),
      track_descriptions_(ExportDescriptionsCanBeTracked()) {}

void Sharing::RevokeGrantsOf(uint64_t owner_session,
                             const backend::Memory* memory) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.owner_session == owner_session &&
           (memory == nullptr || entry.second.memory.get() == memory);
  });
}

absl::StatusOr<uint64_t> Sharing::Grant(uint64_t session, uint64_t buffer,
                                        const std::string& tenant,
                                        uint64_t grantee_session) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "grant buffer"));
  if (tenant.empty() == (grantee_session == 0)) {
    return Refusal(Reason::kBadGrantee,
                   "grant buffer: name exactly one grantee, a tenant or a "
                   "session. Fix: set tenant or session in the request.");
  }
  if (!tenant.empty() && sessions_.tenants().Find(tenant) == nullptr) {
    return Refusal(
        Reason::kUnknownTenant,
        absl::StrFormat("grant buffer: there is no tenant %s. Fix: use a "
                        "name from hrxctl tenants.",
                        shared::QuoteForMessage(tenant)));
  }
  if (grantee_session != 0 && !sessions_.Find(grantee_session).ok()) {
    return Refusal(
        Reason::kUnknownSession,
        absl::StrFormat("grant buffer: there is no open session %016x. Fix: "
                        "grant to a session that is open (or to its tenant).",
                        grantee_session));
  }
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       owner->tenant->Reserve(Resource::kGrants, 1,
                                              "grant buffer", owner->Who()));
  MemoryRef memory;
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(BufferEntry * entry,
                         owner->buffers.Find(buffer, "grant buffer"));
    memory = entry->memory;
    entry->shared_out = true;
  }
  uint64_t id = 0;
  while (id == 0) {
    HRX_CHECK(getrandom(&id, sizeof(id), 0) == sizeof(id));
  }
  {
    absl::MutexLock lock(&mu_);
    grants_[id] = GrantEntry{session, std::move(memory), tenant,
                             grantee_session, std::move(charge)};
  }
  // A Free racing this call revokes its buffer's grants once the handle is
  // gone, possibly before this one was inserted: looked up again, so a
  // freed buffer keeps no grant. (The id has not been handed out yet.)
  absl::Status still_there;
  {
    absl::MutexLock lock(&owner->mu);
    still_there = owner->buffers.Find(buffer, "grant buffer").status();
  }
  if (!still_there.ok()) {
    absl::MutexLock lock(&mu_);
    grants_.erase(id);
    return still_there;
  }
  return id;
}

absl::StatusOr<BufferInfo> Sharing::Import(uint64_t session, uint64_t grant) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> importer,
                       sessions_.Find(session));
  // An import is a handle that can be written through and exported.
  HRX_RETURN_IF_ERROR(RequireWriter(*importer, "import buffer"));
  HRX_ASSIGN_OR_RETURN(ChargeRef handle_charge,
                       importer->tenant->Reserve(Resource::kBuffers, 1,
                                                 "import", importer->Who()));
  MemoryRef memory;
  {
    absl::MutexLock lock(&mu_);
    auto it = grants_.find(grant);
    if (it == grants_.end()) {
      return Refusal(
          Reason::kUnknownGrant,
          absl::StrFormat("import: grant %016x does not exist or was revoked. "
                          "Fix: ask the owner for a current grant.",
                          grant));
    }
    const GrantEntry& entry = it->second;
    const bool allowed = entry.grantee_session != 0
                             ? entry.grantee_session == session
                             : entry.tenant == importer->tenant->name();
    if (!allowed) {
      return Refusal(
          Reason::kGrantNotYours,
          absl::StrFormat(
              "import: grant %016x is for %s; this session "
              "belongs to tenant \"%s\". Fix: import it from the grantee.",
              grant,
              entry.grantee_session != 0
                  ? absl::StrFormat("session %016x", entry.grantee_session)
                  : absl::StrFormat("tenant \"%s\"", entry.tenant),
              importer->tenant->name()));
    }
    memory = entry.memory;
  }
  const uint64_t bytes = memory->size();
  const uint64_t allocation_id = memory->id();
  absl::MutexLock lock(&importer->mu);
  // The importer holds the memory but is not charged for it: the owner's
  // reservation rides on the memory until every holder has let go.
  const uint64_t handle = importer->buffers.Insert(
      BufferEntry{std::move(memory), 0, std::move(handle_charge)});
  return BufferInfo{handle, bytes, allocation_id};
}

absl::Status Sharing::Revoke(uint64_t session, uint64_t grant) {
  absl::MutexLock lock(&mu_);
  auto it = grants_.find(grant);
  if (it == grants_.end() || it->second.owner_session != session) {
    return Refusal(
        Reason::kUnknownGrant,
        absl::StrFormat("revoke: this session has no grant %016x. Fix: revoke "
                        "grants this session made.",
                        grant));
  }
  grants_.erase(it);
  return absl::OkStatus();
}

void Sharing::ForgetSession(uint64_t session) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.owner_session == session;
  });
  // Unredeemed tickets die with the session, descriptors and all.
  absl::erase_if(tickets_, [&](const auto& entry) {
    return entry.second.session == session;
  });
}

void Sharing::ForgetGrantee(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.grantee_session == 0 && entry.second.tenant == tenant;
  });
}

}  // namespace hrx::daemon
