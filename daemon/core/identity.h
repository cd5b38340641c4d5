// Who is calling, as the kernel (or the TLS handshake) reports it, never as
// the client says.
#ifndef HRX_DAEMON_CORE_IDENTITY_H_
#define HRX_DAEMON_CORE_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace hrx::daemon {

struct PeerIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  // 0 for remote callers, and for local peers the kernel cannot show in the
  // daemon's PID namespace: never a process to match or watch.
  pid_t pid = 0;
  // For remote callers: the TLS client certificate's subject.
  std::string certificate_subject;
  // A remote (TLS) caller: identified by certificate subject only; its uid
  // and gid mean nothing.
  bool remote = false;
  // The local connection the call arrived on: unique for the daemon's run,
  // never reused (0 for remote callers). Sessions are bound to it.
  uint64_t connection = 0;
  // Set when the connection came through a tenant's own socket (a
  // socket-bound tenant, docs/kubernetes.md): the caller is that tenant,
  // whatever its uid or gid. Never from the request.
  std::string bound_tenant;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_IDENTITY_H_
