// Socket-bound tenants (docs/kubernetes.md): tenants an admin creates at run
// time, each with a listening socket of its own, so that whoever connects
// through that socket is the tenant whatever its uid (containers commonly
// share one uid, so SO_PEERCRED cannot tell two pods apart). This file
// holds what such a tenant is and the checks on what an admin asks for;
// TenantRegistry keeps them and the server owns their sockets.
#ifndef HRX_DAEMON_CORE_BOUND_TENANTS_H_
#define HRX_DAEMON_CORE_BOUND_TENANTS_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hrx::daemon {

class Tenant;

// Longest bound tenant name: a DNS label, since it names a directory and
// shows in Kubernetes tooling.
inline constexpr size_t kMaxBoundTenantNameBytes = 63;
// Labels an admin may attach to a bound tenant (the device plugin records
// the pod and the device IDs there), and their sizes.
inline constexpr size_t kMaxBoundTenantLabels = 16;
inline constexpr size_t kMaxLabelKeyBytes = 128;
inline constexpr size_t kMaxLabelValueBytes = 1024;
// Bound tenants at once, unless --max_bound_tenants says otherwise: each
// costs a listening socket, a side channel and two accepting threads.
inline constexpr size_t kDefaultMaxBoundTenants = 256;

using Labels = std::map<std::string, std::string>;

// A bound tenant as admins see it.
struct BoundTenantView {
  std::shared_ptr<Tenant> tenant;
  std::string socket_path;  // on the daemon's host
  Labels labels;
  absl::Time created;
};

// INVALID_ARGUMENT "bad_tenant_name" unless `name` is a DNS label
// (lower-case letters, digits and '-', starting and ending with a letter or
// digit, at most kMaxBoundTenantNameBytes).
absl::Status CheckBoundTenantName(const std::string& name);
// INVALID_ARGUMENT "bad_label" past kMaxBoundTenantLabels, for an empty or
// oversized key, a key outside [A-Za-z0-9._/-], or a value that is too long
// or holds control characters.
absl::Status CheckLabels(const Labels& labels);
// PERMISSION_DENIED "tenant_removed": a call through the socket of bound
// tenant `name`, which an admin has since removed.
absl::Status BoundTenantRemoved(const std::string& name,
                                const std::string& what);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_BOUND_TENANTS_H_
