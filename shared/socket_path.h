// Where the daemon listens by default, computed the same way on both sides.
#ifndef HRX_SHARED_SOCKET_PATH_H_
#define HRX_SHARED_SOCKET_PATH_H_

#include <string>

namespace hrx::shared {

// Environment variable a client reads when no socket is given explicitly.
inline constexpr char kSocketEnvVar[] = "HRXD_SOCKET";

// Metadata key carrying the session handle on every call after OpenSession.
inline constexpr char kSessionMetadataKey[] = "hrx-session";

// $XDG_RUNTIME_DIR/hrxd/hrxd.sock when XDG_RUNTIME_DIR is set, else
// /tmp/hrxd-$UID/hrxd.sock.
std::string DefaultSocketPath();

// The socket a client uses: `explicit_path` if non-empty, else $HRXD_SOCKET,
// else DefaultSocketPath().
std::string ResolveClientSocketPath(const std::string& explicit_path);

}  // namespace hrx::shared

#endif  // HRX_SHARED_SOCKET_PATH_H_
