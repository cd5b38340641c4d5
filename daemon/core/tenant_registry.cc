// TenantRegistry at run time: resolving callers, reloading the config, and
// socket-bound tenants (bound_tenants.h), which admins add and remove beside
// the configured ones.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/core/tenants.h"
#include "shared/quote.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

absl::Status TenantRegistry::Reload(TenantRegistry&& fresh) {
  absl::MutexLock lock(&mu_);
  absl::MutexLock fresh_lock(&fresh.mu_);
  for (const Entry& entry : fresh.entries_) {
    if (bound_.count(entry.tenant->name()) != 0) {
      return Refusal(
          Reason::kTenantExists,
          absl::StrFormat("the new config names tenant \"%s\", which is a "
                          "socket-bound tenant now; the previous config is "
                          "kept. Fix: rename it in the config, or remove the "
                          "bound tenant first (hrxctl bound remove %s).",
                          entry.tenant->name(), entry.tenant->name()));
    }
  }
  auto adopt = [&](std::shared_ptr<Tenant>& incoming)
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                     std::shared_ptr<Tenant> existing =
                         incoming->name() == "default" ? default_ : nullptr;
                     for (const Entry& entry : entries_) {
                       if (entry.tenant->name() == incoming->name())
                         existing = entry.tenant;
                     }
                     if (existing != nullptr) {
                       existing->SetLimits(incoming->limits());
                       existing->set_role(incoming->role());
                       existing->set_load_kernels(incoming->load_kernels());
                       existing->set_isolation(incoming->isolation());
                       incoming = existing;
                     }
                   };
  for (Entry& entry : fresh.entries_) adopt(entry.tenant);
  adopt(fresh.default_);
  entries_ = std::move(fresh.entries_);
  default_ = std::move(fresh.default_);
  return absl::OkStatus();
}

std::shared_ptr<Tenant> TenantRegistry::Resolve(
    const PeerIdentity& identity) const {
  absl::MutexLock lock(&mu_);
  if (!identity.bound_tenant.empty()) {
    auto it = bound_.find(identity.bound_tenant);
    return it == bound_.end() ? nullptr : it->second.tenant;
  }
  if (identity.remote) {
    if (identity.certificate_subject.empty()) return nullptr;
    for (const Entry& entry : entries_) {
      if (std::find(entry.subjects.begin(), entry.subjects.end(),
                    identity.certificate_subject) != entry.subjects.end()) {
        return entry.tenant;
      }
    }
    return nullptr;
  }
  for (const Entry& entry : entries_) {
    if (std::find(entry.uids.begin(), entry.uids.end(), identity.uid) !=
        entry.uids.end()) {
      return entry.tenant;
    }
  }
  for (const Entry& entry : entries_) {
    if (std::find(entry.gids.begin(), entry.gids.end(), identity.gid) !=
        entry.gids.end()) {
      return entry.tenant;
    }
  }
  return default_;
}

std::shared_ptr<Tenant> TenantRegistry::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  return FindLocked(name);
}

std::shared_ptr<Tenant> TenantRegistry::FindLocked(
    std::string_view name) const {
  if (name == "default") return default_;
  for (const Entry& entry : entries_) {
    if (entry.tenant->name() == name) return entry.tenant;
  }
  auto it = bound_.find(name);
  return it == bound_.end() ? nullptr : it->second.tenant;
}

std::vector<std::shared_ptr<Tenant>> TenantRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Tenant>> all;
  for (const Entry& entry : entries_) all.push_back(entry.tenant);
  for (const auto& [name, bound] : bound_) all.push_back(bound.tenant);
  all.push_back(default_);
  return all;
}

absl::StatusOr<std::shared_ptr<Tenant>> TenantRegistry::AddBound(
    const std::string& name, const Limits& limits, bool load_kernels,
    const Labels& labels, const std::string& socket_path, size_t max_bound,
    absl::Time now) {
  HRX_RETURN_IF_ERROR(CheckBoundTenantName(name));
  HRX_RETURN_IF_ERROR(CheckLabels(labels));
  absl::MutexLock lock(&mu_);
  if (FindLocked(name) != nullptr) {
    return Refusal(
        Reason::kTenantExists,
        absl::StrFormat(
            "a tenant named \"%s\" already exists (%s). Fix: "
            "choose another name%s.",
            name, bound_.count(name) != 0 ? "a bound tenant" : "in the config",
            bound_.count(name) != 0
                ? ", or remove it first (hrxctl bound remove)"
                : ""));
  }
  if (bound_.size() >= max_bound) {
    return Refusal(
        Reason::kTooManyBoundTenants,
        absl::StrFormat("%u bound tenants exist; --max_bound_tenants is %u. "
                        "Fix: remove bound tenants no longer used, or raise "
                        "--max_bound_tenants.",
                        bound_.size(), max_bound));
  }
  auto tenant =
      std::make_shared<Tenant>(name, Role::kClient, limits, load_kernels);
  bound_[name] = BoundTenantView{tenant, socket_path, labels, now};
  return tenant;
}

absl::StatusOr<std::shared_ptr<Tenant>> TenantRegistry::RemoveBound(
    const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = bound_.find(name);
  if (it == bound_.end()) {
    return Refusal(
        Reason::kUnknownTenant,
        absl::StrFormat("no bound tenant is named %s (%u exist). "
                        "Fix: hrxctl bound list shows them.",
                        shared::QuoteForMessage(name), bound_.size()));
  }
  std::shared_ptr<Tenant> tenant = std::move(it->second.tenant);
  bound_.erase(it);
  return tenant;
}

absl::Status TenantRegistry::SetBoundLabels(const std::string& name,
                                            const Labels& labels) {
  HRX_RETURN_IF_ERROR(CheckLabels(labels));
  absl::MutexLock lock(&mu_);
  auto it = bound_.find(name);
  if (it == bound_.end()) {
    return Refusal(Reason::kUnknownTenant,
                   absl::StrFormat("no bound tenant is named %s. Fix: hrxctl "
                                   "bound list shows them.",
                                   shared::QuoteForMessage(name)));
  }
  it->second.labels = labels;
  return absl::OkStatus();
}

std::vector<BoundTenantView> TenantRegistry::Bound() const {
  absl::MutexLock lock(&mu_);
  std::vector<BoundTenantView> all;
  for (const auto& [name, bound] : bound_) all.push_back(bound);
  return all;
}

}  // namespace hrx::daemon
