#include "daemon/core/admin_views.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "shared/quote.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

absl::Status AdminViews::RequireRole(const PeerIdentity& caller,
                                     Role role) const {
  std::shared_ptr<Tenant> tenant = sessions_.tenants().Resolve(caller);
  const Role has = tenant != nullptr ? tenant->role() : Role::kClient;
  const bool allowed = has == Role::kAdmin ||
                       (role == Role::kObserver && has == Role::kObserver);
  if (allowed) return absl::OkStatus();
  return Refusal(
      Reason::kRoleRequired,
      absl::StrFormat("uid %u (tenant \"%s\") has role %s; this needs %s. "
                      "Fix: run it as a uid of a tenant with that role in "
                      "the config.",
                      caller.uid, tenant != nullptr ? tenant->name() : "none",
                      std::string(RoleName(has)), std::string(RoleName(role))));
}

absl::Status AdminViews::RequireKnownCaller(const PeerIdentity& caller) const {
  if (sessions_.tenants().Resolve(caller) != nullptr) return absl::OkStatus();
  return Refusal(
      Reason::kUnknownCertificate,
      absl::StrFormat("no tenant lists certificate subject \"%s\". Fix: "
                      "add it to a tenant's certificate_subjects.",
                      caller.certificate_subject));
}

DeviceInfo AdminViews::device_info() const {
  const backend::DeviceProperties& properties = devices_.properties();
  return DeviceInfo{properties.backend, properties.name,
                    properties.target,  properties.memory_bytes,
                    queues_.capacity(), properties.integrated};
}

CoreStatus AdminViews::status() const {
  CoreStatus status;
  status.device = device_info();
  status.uptime_seconds = static_cast<uint64_t>(
      absl::ToInt64Seconds(sessions_.clock().Now() - started_));
  status.bytes_in_use = devices_.bytes_in_use();
  status.queues_created = queues_.created();
  const std::vector<SessionTable::Entry> sessions = sessions_.Select();
  status.sessions = sessions.size();
  for (const auto& [handle, session] : sessions) {
    absl::MutexLock lock(&session->mu);
    status.buffers += session->buffers.size();
    status.streams += session->streams.size();
    status.kernels += session->kernels.size();
    status.events += session->events.size();
  }
  static_cast<WorkTotals&>(status) = SumWork(sessions_);
  const WorkTotals elsewhere = devices_.WorkElsewhere();
  status += elsewhere;
  status.executor_commands = elsewhere.commands_submitted;
  return status;
}

WorkTotals SumWork(const SessionTable& table) {
  WorkTotals totals;
  for (const auto& [handle, session] : table.Select()) {
    absl::MutexLock lock(&session->mu);
    totals.commands_submitted += session->commands_submitted;
    totals.allocation_pool += session->allocation_pool.stats();
    totals.staging_pool += session->staging_pool.stats();
    session->streams.ForEach([&](const std::shared_ptr<StreamEntry>& stream) {
      totals.dispatch_cache += stream->dispatch_cache.stats();
      totals.transfer_cache += stream->transfer_cache.stats();
      totals.upload_staging += stream->staging.stats();
      totals.suspended_streams += stream->suspended ? 1 : 0;
      totals.parked_operations += stream->parked.size();
    });
  }
  return totals;
}

std::vector<TenantUsage> AdminViews::ListTenants() const {
  std::vector<TenantUsage> list;
  absl::flat_hash_map<const Tenant*, uint64_t> sessions = SessionsByTenant();
  for (const std::shared_ptr<Tenant>& tenant : sessions_.tenants().All()) {
    list.push_back(UsageOf(*tenant, sessions[tenant.get()]));
  }
  return list;
}

absl::flat_hash_map<const Tenant*, uint64_t> AdminViews::SessionsByTenant()
    const {
  absl::flat_hash_map<const Tenant*, uint64_t> sessions;
  for (const auto& [handle, session] : sessions_.Select()) {
    ++sessions[session->tenant.get()];
  }
  return sessions;
}

TenantUsage AdminViews::UsageOf(const Tenant& tenant, uint64_t sessions) const {
  TenantUsage usage;
  usage.name = tenant.name();
  usage.role = tenant.role();
  usage.limits = tenant.limits();
  usage.usage = tenant.usage();
  const UsageCounts elsewhere = devices_.HeldElsewhere(tenant.name());
  for (size_t i = 0; i < kResourceCount; ++i) {
    uint64_t& total = usage.usage[i];
    total =
        elsewhere[i] > UINT64_MAX - total ? UINT64_MAX : total + elsewhere[i];
  }
  usage.sessions = sessions;
  usage.load_kernels = tenant.load_kernels();
  const Sharing::Retired detached = sharing_.RetiredExports(tenant.name());
  usage.detached_exports = detached.count;
  usage.detached_export_bytes = detached.bytes;
  return usage;
}

absl::StatusOr<std::shared_ptr<Tenant>> AdminViews::AddBoundTenant(
    const std::string& name, const Limits& limits, bool load_kernels,
    const Labels& labels, const std::string& socket_path, size_t max_bound) {
  return sessions_.tenants().AddBound(name, limits, load_kernels, labels,
                                      socket_path, max_bound,
                                      sessions_.clock().Now());
}

absl::Status AdminViews::SetBoundTenantLabels(const std::string& name,
                                              const Labels& labels) {
  return sessions_.tenants().SetBoundLabels(name, labels);
}

std::vector<BoundTenantSummary> AdminViews::ListBoundTenants() const {
  std::vector<BoundTenantSummary> list;
  absl::flat_hash_map<const Tenant*, uint64_t> sessions = SessionsByTenant();
  for (BoundTenantView& bound : sessions_.tenants().Bound()) {
    const Tenant* tenant = bound.tenant.get();
    list.push_back(BoundTenantSummary{UsageOf(*tenant, sessions[tenant]),
                                      std::move(bound.socket_path),
                                      std::move(bound.labels), bound.created});
  }
  return list;
}

std::vector<SessionSummary> AdminViews::ListSessions(
    const std::string& tenant) const {
  const std::vector<SessionTable::Entry> sessions =
      sessions_.Select([&](uint64_t, const Session& s) {
        return tenant.empty() || s.tenant->name() == tenant;
      });
  std::vector<SessionSummary> list;
  for (const auto& [handle, session] : sessions) {
    SessionSummary summary;
    summary.id = handle;
    summary.tenant = session->tenant->name();
    summary.client_name = session->client_name;
    summary.uid = session->identity.uid;
    summary.pid = static_cast<uint32_t>(session->identity.pid);
    absl::MutexLock lock(&session->mu);
    summary.buffers = session->buffers.size();
    summary.streams = session->streams.size();
    summary.kernels = session->kernels.size();
    session->buffers.ForEach([&](const BufferEntry& buffer) {
      summary.buffer_bytes += buffer.memory->size();
    });
    list.push_back(std::move(summary));
  }
  return list;
}

std::vector<BufferSummary> AdminViews::ListBuffers(const std::string& tenant,
                                                   uint64_t session) const {
  const std::vector<SessionTable::Entry> sessions =
      sessions_.Select([&](uint64_t handle, const Session& s) {
        return (tenant.empty() || s.tenant->name() == tenant) &&
               (session == 0 || session == handle);
      });
  std::vector<BufferSummary> list;
  for (const auto& selected : sessions) {
    // Named copies: a lambda may not capture structured bindings (clang).
    const uint64_t handle = selected.first;
    const auto& owner = selected.second;
    absl::MutexLock lock(&owner->mu);
    owner->buffers.ForEachHandle(
        [&](uint64_t buffer, const BufferEntry& entry) {
          list.push_back(BufferSummary{
              handle, owner->tenant->name(), buffer, entry.memory->size(),
              entry.memory->id(),
              entry.memory->kind() == backend::MemoryKind::kHostCoherent});
        });
  }
  return list;
}

absl::Status AdminViews::SetBudget(const std::string& tenant,
                                   const Limits& limits) {
  std::shared_ptr<Tenant> found = sessions_.tenants().Find(tenant);
  if (found == nullptr) {
    return Refusal(
        Reason::kUnknownTenant,
        absl::StrFormat("set budget: there is no tenant %s. Fix: use a "
                        "name from hrxctl tenants.",
                        shared::QuoteForMessage(tenant)));
  }
  found->SetLimits(limits);
  return absl::OkStatus();
}

absl::Status AdminViews::SetQueueCount(uint64_t session, uint32_t count) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  if (owner->tenant->role() != Role::kAdmin) {
    return Refusal(
        Reason::kRoleRequired,
        absl::StrFormat("set queue count: the pool is shared by every tenant, "
                        "and tenant \"%s\" is not an admin. Fix: ask an admin, "
                        "or start hrxd "
                        "with --queue_count.",
                        owner->tenant->name()));
  }
  return queues_.SetCapacity(count);
}

absl::Status AdminViews::ReloadTenants(TenantRegistry&& fresh) {
  return sessions_.tenants().Reload(std::move(fresh));
}

}  // namespace hrx::daemon
