// Who is calling, as the kernel reports it (never as the client says).
#ifndef HRX_DAEMON_CORE_IDENTITY_H_
#define HRX_DAEMON_CORE_IDENTITY_H_

#include <sys/types.h>

#include <string>

namespace hrx::daemon {

struct PeerIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;  // 0 for remote callers
  // For remote callers: the TLS client certificate's subject.
  std::string certificate_subject;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_IDENTITY_H_
