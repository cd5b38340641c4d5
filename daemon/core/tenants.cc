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

}  // namespace hrx::daemon
