// Where the daemon listens by default, computed the same way on both sides.
#ifndef HRX_SHARED_SOCKET_PATH_H_
#define HRX_SHARED_SOCKET_PATH_H_

#include <string>

#include "absl/status/status.h"

namespace hrx::shared {

// Environment variable a client reads when no socket is given explicitly.
inline constexpr char kSocketEnvVar[] = "HRXD_SOCKET";

// Metadata key carrying the session handle on every call after OpenSession.
inline constexpr char kSessionMetadataKey[] = "hrx-session";

// The system daemon's socket (systemd's RuntimeDirectory): only root can
// create /run/hrxd.
inline constexpr char kSystemSocketPath[] = "/run/hrxd/hrxd.sock";
// The user that runs the system daemon (deploy/hrxd.sysusers).
inline constexpr char kDaemonUser[] = "hrxd";

// Where hrxd listens by default: kSystemSocketPath when it runs as root,
// else $XDG_RUNTIME_DIR/hrxd/hrxd.sock, else /tmp/hrxd-$UID/hrxd.sock.
std::string DefaultSocketPath();

// Where a client looks by default: kSystemSocketPath when it exists, else
// as DefaultSocketPath for the client's own uid.
std::string DefaultClientSocketPath();

// Whether a client may trust the daemon socket at `path`: the socket and its
// directory must belong to root, to the caller, or to the daemon's user
// (kDaemonUser), and the directory must be writable by no one else (unless
// sticky). Anyone else could have created them to impersonate hrxd.
// FAILED_PRECONDITION "untrusted_socket" naming the owner and the fix. A
// path that does not exist is OK here (connecting will say so).
absl::Status CheckTrustedSocket(const std::string& path);

// The descriptor side channel beside a daemon socket: `socket_path` +
// ".fds". Clients derive it from the socket they connected to (not from the
// path the daemon reports) so that it is found wherever the socket's
// directory is mounted, as in a container.
std::string SideChannelPath(const std::string& socket_path);

// The socket a client uses: `explicit_path` if non-empty, else $HRXD_SOCKET,
// else DefaultClientSocketPath().
std::string ResolveClientSocketPath(const std::string& explicit_path);

}  // namespace hrx::shared

#endif  // HRX_SHARED_SOCKET_PATH_H_
