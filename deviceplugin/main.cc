// hrx-device-plugin: the kubelet's device plugin for hrxd (docs/kubernetes.md).
// It advertises hrxd's device memory as an extended resource, turns each
// container's allocation into a socket-bound tenant in hrxd, and removes
// tenants whose pods are gone. It keeps no state of its own, so it survives
// restarts of the kubelet, of hrxd and of itself.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/hrxd_admin.h"
#include "deviceplugin/log.h"
#include "deviceplugin/options.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/reconciler.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

ABSL_FLAG(std::string, hrxd_socket, "/run/hrxd/hrxd.sock",
          "hrxd's main socket (the plugin must be an admin tenant there)");
ABSL_FLAG(std::string, kubelet_socket,
          "/var/lib/kubelet/device-plugins/kubelet.sock",
          "the kubelet's registration socket");
ABSL_FLAG(std::string, plugin_socket,
          "/var/lib/kubelet/device-plugins/hrx.sock",
          "where the plugin serves the kubelet (beside --kubelet_socket)");
ABSL_FLAG(std::string, pod_resources_socket,
          "/var/lib/kubelet/pod-resources/kubelet.sock",
          "the kubelet's pod resources API, read to reclaim tenants");
ABSL_FLAG(std::string, resource_name, "hrx.dev/gpu-memory",
          "the extended resource advertised");
ABSL_FLAG(std::string, unit, "1GiB",
          "device memory per advertised device (e.g. 1GiB, 256MiB)");
ABSL_FLAG(std::string, shared_bytes, "64MiB",
          "host-mapped bytes each container's tenant may use (rings too)");
ABSL_FLAG(std::string, container_socket_dir, "/run/hrxd",
          "where a container sees its tenant's socket directory");
ABSL_FLAG(bool, load_kernels, false,
          "containers' tenants may load kernels (each then runs in an "
          "executor of its own)");
ABSL_FLAG(int64_t, reconcile_ms, 2000,
          "how often the plugin checks hrxd, the kubelet and pods");
ABSL_FLAG(int64_t, allocation_grace_ms, 60000,
          "a tenant no pod has claimed this long after Allocate is removed");
ABSL_FLAG(bool, describe, false,
          "print what the plugin would advertise and where, as JSON, and "
          "exit");

namespace hrx::deviceplugin {
namespace {

// The inode of a socket file, or 0 when there is none: how the plugin
// notices the kubelet restarted (it makes a new kubelet.sock and deletes
// every plugin socket in its directory).
ino_t InodeOf(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The plugin's gRPC server on its socket, for one registration.
struct Serving {
  std::unique_ptr<grpc::Server> server;
  ino_t socket_inode = 0;
  ino_t kubelet_inode = 0;  // of the kubelet socket registered with
};

absl::StatusOr<Serving> Serve(const PluginOptions& options,
                              PluginService& service) {
  unlink(options.plugin_socket.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", options.plugin_socket),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  Serving serving;
  serving.server = builder.BuildAndStart();
  serving.socket_inode = InodeOf(options.plugin_socket);
  if (serving.server == nullptr || serving.socket_inode == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot serve on %s. Fix: check that the kubelet's device-plugins "
        "directory is mounted writable.",
        options.plugin_socket));
  }
  return serving;
}

absl::Status Register(const PluginOptions& options) {
  auto channel = grpc::CreateChannel(
      absl::StrCat("unix:", options.kubelet_socket),
      grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(BaseName(options.plugin_socket));
  request.set_resource_name(options.resource_name);
  request.mutable_options()->set_pre_start_required(true);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty response;
  const grpc::Status status =
      v1beta1::Registration::NewStub(channel)->Register(&context, request,
                                                        &response);
  if (status.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrFormat(
      "registering with the kubelet at %s: %s", options.kubelet_socket,
      status.error_message()));
}

absl::StatusOr<PluginOptions> ReadFlags() {
  PluginOptions options;
  options.hrxd_socket = absl::GetFlag(FLAGS_hrxd_socket);
  options.kubelet_socket = absl::GetFlag(FLAGS_kubelet_socket);
  options.plugin_socket = absl::GetFlag(FLAGS_plugin_socket);
  options.pod_resources_socket = absl::GetFlag(FLAGS_pod_resources_socket);
  options.resource_name = absl::GetFlag(FLAGS_resource_name);
  auto unit = ParseBytes(absl::GetFlag(FLAGS_unit));
  if (!unit.ok()) return unit.status();
  options.unit_bytes = *unit;
  auto shared = ParseBytes(absl::GetFlag(FLAGS_shared_bytes));
  if (!shared.ok()) return shared.status();
  options.shared_bytes = *shared;
  options.container_socket_dir = absl::GetFlag(FLAGS_container_socket_dir);
  options.load_kernels = absl::GetFlag(FLAGS_load_kernels);
  if (absl::GetFlag(FLAGS_reconcile_ms) <= 0 ||
      absl::GetFlag(FLAGS_allocation_grace_ms) < 0) {
    return absl::InvalidArgumentError(
        "--reconcile_ms must be positive and --allocation_grace_ms not "
        "negative. Fix: pass e.g. 2000 and 60000.");
  }
  options.reconcile_interval =
      absl::Milliseconds(absl::GetFlag(FLAGS_reconcile_ms));
  options.allocation_grace =
      absl::Milliseconds(absl::GetFlag(FLAGS_allocation_grace_ms));
  if (absl::Status valid = CheckOptions(options); !valid.ok()) return valid;
  return options;
}

// Waits one interval; true when a stop signal came.
bool StopRequested(const sigset_t& signals, absl::Duration interval) {
  const timespec timeout = absl::ToTimespec(interval);
  const int received = sigtimedwait(&signals, nullptr, &timeout);
  return received == SIGTERM || received == SIGINT;
}

int Run(const PluginOptions& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  HrxdAdmin hrxd(options.hrxd_socket);
  // The device count comes from hrxd: wait for it (the DaemonSet starts
  // both containers at once).
  uint64_t device_count = 0;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<uint64_t> memory = hrxd.DeviceMemory();
    if (memory.ok()) {
      absl::StatusOr<uint64_t> count =
          DeviceCount(*memory, options.unit_bytes);
      if (!count.ok()) {
        Log(std::string(count.status().message()));
        return 1;
      }
      device_count = *count;
      break;
    }
    if (attempt % 10 == 0) {
      Log(absl::StrCat("waiting for hrxd: ", memory.status().message()));
    }
    if (StopRequested(signals, options.reconcile_interval)) return 0;
  }
  Log(absl::StrFormat("advertising %u devices of %s (%u bytes each)",
                      device_count, options.resource_name,
                      options.unit_bytes));
  PluginService service(options, hrxd, device_count);
  Reconciler reconciler(options, hrxd, service);
  std::optional<Serving> serving;
  bool registered = false;
  do {
    service.SetHealthy(hrxd.Healthy().ok());
    // The kubelet deletes plugin sockets when it restarts and makes a new
    // socket of its own: serve anew and register again.
    const bool socket_gone =
        serving && InodeOf(options.plugin_socket) != serving->socket_inode;
    const bool kubelet_new =
        serving && registered &&
        InodeOf(options.kubelet_socket) != serving->kubelet_inode;
    if (!serving || socket_gone) {
      if (serving) {
        Log("the plugin socket was removed (a kubelet restart): serving anew");
        service.Stop();
        serving->server->Shutdown(absl::ToChronoTime(absl::Now()));
        serving.reset();
        service.Restart();
      }
      absl::StatusOr<Serving> started = Serve(options, service);
      if (!started.ok()) {
        Log(std::string(started.status().message()));
      } else {
        serving = *std::move(started);
        registered = false;
      }
    }
    if (serving && (!registered || kubelet_new)) {
      const ino_t kubelet = InodeOf(options.kubelet_socket);
      absl::Status status = Register(options);
      registered = status.ok();
      if (registered) {
        serving->kubelet_inode = kubelet;
        Log(absl::StrCat("registered ", options.resource_name,
                         " with the kubelet"));
      } else {
        Log(std::string(status.message()));
      }
    }
    reconciler.Pass(absl::Now());
  } while (!StopRequested(signals, options.reconcile_interval));
  Log("stopping");
  service.Stop();
  if (serving) {
    serving->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    unlink(options.plugin_socket.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace hrx::deviceplugin

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "hrx-device-plugin: the kubelet device plugin for hrxd "
      "(docs/kubernetes.md)");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<hrx::deviceplugin::PluginOptions> options =
      hrx::deviceplugin::ReadFlags();
  if (!options.ok()) {
    absl::FPrintF(stderr, "hrx-device-plugin: %s\n",
                  options.status().message());
    return 2;
  }
  if (absl::GetFlag(FLAGS_describe)) {
    absl::PrintF("%s\n", hrx::deviceplugin::DescribeJson(*options));
    return 0;
  }
  return hrx::deviceplugin::Run(*options);
}
