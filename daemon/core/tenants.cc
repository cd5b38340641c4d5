#include "daemon/core/tenants.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "shared/bytes.h"
#include "shared/quote.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using google::protobuf::TextFormat;

std::string Amount(Resource resource, uint64_t value) {
  if (resource == Resource::kDeviceBytes ||
      resource == Resource::kSharedBytes || resource == Resource::kReplyBytes) {
    return absl::StrFormat("%s (%u bytes)", shared::FormatBytes(value), value);
  }
  return absl::StrFormat("%u", value);
}

class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrFormat("line %d, column %d: %s", line + 1, column + 1,
                               message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

absl::Status ConfigError(const std::string& source, int line,
                         const std::string& field, const std::string& why) {
  return Refusal(
      Reason::kConfigInvalid,
      absl::StrFormat("%s:%d: field %s: %s. Fix: correct the file; see "
                      "deploy/hrxd.conf.",
                      source, line + 1, field, why));
}

}  // namespace

std::string_view ResourceName(Resource resource) {
  static constexpr std::string_view kNames[kResourceCount] = {
      "device_bytes", "shared_bytes",      "streams",  "kernels",
      "graphs",       "inflight_commands", "sessions", "buffers",
      "exports",      "connections",       "events",   "grants",
      "reply_bytes"};
  return kNames[static_cast<size_t>(resource)];
}

std::optional<uint64_t> DefaultLimit(Resource resource) {
  switch (resource) {
    case Resource::kSessions:
      return kDefaultSessionsPerTenant;
    case Resource::kStreams:
      return kDefaultStreamsPerTenant;
    case Resource::kKernels:
      return kDefaultKernelsPerTenant;
    case Resource::kGraphs:
      return kDefaultGraphsPerTenant;
    case Resource::kBuffers:
      return kDefaultBuffersPerTenant;
    case Resource::kExports:
      return kDefaultExportsPerTenant;
    case Resource::kConnections:
      return kDefaultConnectionsPerTenant;
    case Resource::kEvents:
      return kDefaultEventsPerTenant;
    case Resource::kGrants:
      return kDefaultGrantsPerTenant;
    case Resource::kReplyBytes:
      return kDefaultReplyBytesPerTenant;
    default:
      return std::nullopt;
  }
}

// Budget and Usage name their fields after ResourceName, so the mapping is
// by name, never by position.
Limits LimitsFromBudget(const hrx::v1::Budget& budget) {
  const auto* reflection = budget.GetReflection();
  Limits limits;
  for (size_t r = 0; r < kResourceCount; ++r) {
    const Resource resource = static_cast<Resource>(r);
    const auto* field = hrx::v1::Budget::descriptor()->FindFieldByName(
        std::string(ResourceName(resource)));
    limits[r] =
        reflection->HasField(budget, field)
            ? std::optional<uint64_t>(reflection->GetUInt64(budget, field))
            : DefaultLimit(resource);
  }
  return limits;
}

hrx::v1::Budget BudgetFromLimits(const Limits& limits) {
  hrx::v1::Budget budget;
  const auto* reflection = budget.GetReflection();
  for (size_t r = 0; r < kResourceCount; ++r) {
    if (!limits[r]) continue;
    const auto* field = hrx::v1::Budget::descriptor()->FindFieldByName(
        std::string(ResourceName(static_cast<Resource>(r))));
    reflection->SetUInt64(&budget, field, *limits[r]);
  }
  return budget;
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "ROLE_CLIENT";
    case Role::kObserver:
      return "ROLE_OBSERVER";
    case Role::kAdmin:
      return "ROLE_ADMIN";
  }
  return "ROLE_CLIENT";
}

Isolation IsolationFromConfig(hrx::v1::Isolation isolation) {
  switch (isolation) {
    case hrx::v1::ISOLATION_OWN_EXECUTOR:
      return Isolation::kOwnExecutor;
    case hrx::v1::ISOLATION_SHARED_EXECUTOR:
      return Isolation::kSharedExecutor;
    default:
      return Isolation::kDefault;
  }
}

Role RoleFromConfig(hrx::v1::Role role) {
  switch (role) {
    case hrx::v1::ROLE_OBSERVER:
      return Role::kObserver;
    case hrx::v1::ROLE_ADMIN:
      return Role::kAdmin;
    default:
      return Role::kClient;
  }
}

Charge::~Charge() { tenant_->Release(resource_, amount_); }

absl::StatusOr<ChargeRef> Tenant::Reserve(Resource resource, uint64_t amount,
                                          std::string_view what,
                                          std::string_view who) {
  const size_t index = static_cast<size_t>(resource);
  {
    absl::MutexLock lock(&mu_);
    const uint64_t used = usage_[index];
    const std::optional<uint64_t> ceiling = limits_[index];
    if (ceiling && (*ceiling < used || amount > *ceiling - used)) {
      return Refusal(
          Reason::kBudgetExhausted,
          absl::StrFormat(
              "%s: tenant \"%s\" (%s) would use %s of its %s "
              "budget of %s (in use %s, asked %s). Fix: release what the "
              "tenant "
              "no longer needs, or have an admin raise its %s (hrxctl budget "
              "set).",
              what, name_, who,
              // Saturating: an ask near 2^64 must not wrap in the message.
              Amount(resource, amount > ~uint64_t{0} - used ? ~uint64_t{0}
                                                            : used + amount),
              ResourceName(resource), Amount(resource, *ceiling),
              Amount(resource, used), Amount(resource, amount),
              ResourceName(resource)));
    }
    usage_[index] = used + amount;
  }
  return ChargeRef(new Charge(shared_from_this(), resource, amount));
}

void Tenant::Release(Resource resource, uint64_t amount) {
  absl::MutexLock lock(&mu_);
  usage_[static_cast<size_t>(resource)] -= amount;
}

void Tenant::SetLimits(const Limits& limits) {
  absl::MutexLock lock(&mu_);
  limits_ = limits;
}

Limits Tenant::limits() const {
  absl::MutexLock lock(&mu_);
  return limits_;
}

UsageCounts Tenant::usage() const {
  absl::MutexLock lock(&mu_);
  return usage_;
}

bool Tenant::Unlimited(Resource resource) const {
  absl::MutexLock lock(&mu_);
  return !limits_[static_cast<size_t>(resource)].has_value();
}

absl::StatusOr<std::unique_ptr<TenantRegistry>> TenantRegistry::Load(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Refusal(Reason::kConfigUnreadable,
                   absl::StrFormat("cannot read config file %s. Fix: pass an "
                                   "existing, readable file to --config.",
                                   path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<std::unique_ptr<TenantRegistry>> TenantRegistry::Parse(
    const std::string& text, const std::string& source) {
  hrx::v1::DaemonConfig config;
  TextFormat::Parser parser;
  ErrorCollector errors;
  TextFormat::ParseInfoTree locations;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&locations);
  if (!parser.ParseFromString(text, &config)) {
    return Refusal(
        Reason::kConfigInvalid,
        absl::StrFormat("%s: %s. Fix: correct the file; see deploy/hrxd.conf.",
                        source, errors.first()));
  }
  const auto* tenants_field =
      hrx::v1::DaemonConfig::descriptor()->FindFieldByName("tenants");
  const auto* name_field =
      hrx::v1::Tenant::descriptor()->FindFieldByName("name");
  const auto* uids_field =
      hrx::v1::Tenant::descriptor()->FindFieldByName("uids");
  auto registry = std::unique_ptr<TenantRegistry>(new TenantRegistry());
  absl::flat_hash_map<std::string, int> names;
  absl::flat_hash_map<uint32_t, std::string> uid_owner;
  for (int i = 0; i < config.tenants_size(); ++i) {
    const hrx::v1::Tenant& tenant = config.tenants(i);
    TextFormat::ParseInfoTree* tree =
        locations.GetTreeForNested(tenants_field, i);
    const int tenant_line = locations.GetLocation(tenants_field, i).line;
    if (tenant.name().empty()) {
      return ConfigError(source, tenant_line, "tenants.name",
                         "every tenant needs a name");
    }
    if (tenant.name() == "default" || !names.emplace(tenant.name(), i).second) {
      return ConfigError(
          source, tree ? tree->GetLocation(name_field, -1).line : tenant_line,
          "tenants.name",
          absl::StrFormat("tenant name \"%s\" is used twice or reserved",
                          tenant.name()));
    }
    for (int u = 0; u < tenant.uids_size(); ++u) {
      auto [it, fresh] = uid_owner.emplace(tenant.uids(u), tenant.name());
      if (!fresh) {
        return ConfigError(
            source, tree ? tree->GetLocation(uids_field, u).line : tenant_line,
            "tenants.uids",
            absl::StrFormat("uid %u is in tenants \"%s\" and \"%s\"",
                            tenant.uids(u), it->second, tenant.name()));
      }
    }
    Entry entry;
    entry.tenant = std::make_shared<Tenant>(
        tenant.name(), RoleFromConfig(tenant.role()),
        LimitsFromBudget(tenant.budget()), tenant.load_kernels());
    entry.tenant->set_isolation(IsolationFromConfig(tenant.isolation()));
    entry.uids.assign(tenant.uids().begin(), tenant.uids().end());
    entry.gids.assign(tenant.gids().begin(), tenant.gids().end());
    entry.subjects.assign(tenant.certificate_subjects().begin(),
                          tenant.certificate_subjects().end());
    absl::MutexLock lock(&registry->mu_);
    registry->entries_.push_back(std::move(entry));
  }
  const hrx::v1::Tenant& fallback = config.default_tenant();
  if (fallback.load_kernels()) {
    const auto* default_field =
        hrx::v1::DaemonConfig::descriptor()->FindFieldByName("default_tenant");
    return ConfigError(source, locations.GetLocation(default_field, -1).line,
                       "default_tenant.load_kernels",
                       "unknown callers may never load kernels");
  }
  if (fallback.role() == hrx::v1::ROLE_ADMIN) {
    const auto* default_field =
        hrx::v1::DaemonConfig::descriptor()->FindFieldByName("default_tenant");
    return ConfigError(source, locations.GetLocation(default_field, -1).line,
                       "default_tenant.role",
                       "unknown callers cannot be admins");
  }
  absl::MutexLock lock(&registry->mu_);
  registry->default_ =
      std::make_shared<Tenant>("default", RoleFromConfig(fallback.role()),
                               LimitsFromBudget(fallback.budget()));
  return registry;
}

std::unique_ptr<TenantRegistry> TenantRegistry::BuiltIn(uid_t daemon_uid) {
  auto registry = std::unique_ptr<TenantRegistry>(new TenantRegistry());
  absl::MutexLock lock(&registry->mu_);
  Entry local;
  // The daemon's own user: trusted as the daemon itself is.
  local.tenant = std::make_shared<Tenant>("local", Role::kAdmin, Limits{},
                                          /*load_kernels=*/true);
  local.uids = {static_cast<uint32_t>(daemon_uid)};
  if (daemon_uid != 0) local.uids.push_back(0);
  registry->entries_.push_back(std::move(local));
  registry->default_ = std::make_shared<Tenant>(
      "default", Role::kClient, LimitsFromBudget(hrx::v1::Budget()));
  return registry;
}

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
  auto adopt = [&](std::shared_ptr<Tenant>& incoming) {
    std::shared_ptr<Tenant> existing =
        incoming->name() == "default" ? default_ : nullptr;
    for (const Entry& entry : entries_) {
      if (entry.tenant->name() == incoming->name()) existing = entry.tenant;
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
