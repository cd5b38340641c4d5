// Test helper: a "container" as a runtime makes one for a client of a
// socket-bound tenant: a mount namespace of its own in which the tenant's
// socket directory is bind-mounted (read-only when asked) at a path of the
// container's, so that the process reaches the tenant's socket only
// through that mount, as a pod does. Needs root (tests run unsandboxed).
#ifndef HRX_TESTS_CONTAINER_H_
#define HRX_TESTS_CONTAINER_H_

#include <string>
#include <vector>

namespace hrx::testing {

struct ContainerMount {
  std::string host_path;       // the tenant's directory on the host
  std::string container_path;  // an existing directory to mount it on
  bool read_only = true;
};

// The command line that runs `argv` in such a container with `env`
// (NAME=VALUE) added. It prints "mounted: yes" once the mount is made; with
// `go_file`, it then waits for that file to exist before starting `argv`.
inline std::vector<std::string> InContainer(
    const ContainerMount& mount, const std::vector<std::string>& env,
    const std::vector<std::string>& argv, const std::string& go_file = "") {
  std::vector<std::string> command = {
      "/usr/bin/unshare",
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      "mount --bind \"$1\" \"$2\" && { [ \"$3\" = 0 ] || mount -o "
      "remount,bind,ro \"$2\"; } && echo mounted: yes && "
      "while [ -n \"$4\" ] && [ ! -e \"$4\" ]; do sleep 0.05; done && "
      "shift 4 && exec \"$@\"",
      "container",
      mount.host_path,
      mount.container_path,
      mount.read_only ? "1" : "0",
      go_file,
      "/usr/bin/env"};
  command.insert(command.end(), env.begin(), env.end());
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

}  // namespace hrx::testing

#endif  // HRX_TESTS_CONTAINER_H_
