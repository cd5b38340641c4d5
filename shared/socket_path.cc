#include "shared/socket_path.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace hrx::shared {

std::string DefaultSocketPath() {
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir != nullptr && runtime_dir[0] != '\0') {
    return absl::StrCat(runtime_dir, "/hrxd/hrxd.sock");
  }
  return absl::StrCat("/tmp/hrxd-", getuid(), "/hrxd.sock");
}

std::string ResolveClientSocketPath(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  const char* env = std::getenv(kSocketEnvVar);
  if (env != nullptr && env[0] != '\0') return env;
  return DefaultSocketPath();
}

}  // namespace hrx::shared
