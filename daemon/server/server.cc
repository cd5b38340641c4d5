#include "daemon/server/server.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/server/services.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"

namespace hrx::daemon {

class Services {
 public:
  Services(Core& core, bool serve_rings_in_executors)
      : executor_rings(serve_rings_in_executors
                           ? std::make_unique<ExecutorRings>(core)
                           : nullptr),
        rings(core, executor_rings.get()),
        sessions(core, peers),
        devices(core, peers),
        buffers(core, peers),
        streams(core, peers, rings, executor_rings.get()),
        kernels(core, peers),
        events(core, peers, executor_rings.get()),
        graphs(core, peers),
        status(core, peers),
        admin(core, peers) {
    // A local connection's end closes the sessions bound to it.
    peers.set_on_closed(
        [&core](uint64_t connection) { core.ConnectionClosed(connection); });
  }
  PeerRegistry peers;  // first: the services below refer to it
  std::unique_ptr<ExecutorRings> executor_rings;  // null: hrxd serves rings
  RingRegistry rings;
  SessionsService sessions;
  DevicesService devices;
  BuffersService buffers;
  StreamsService streams;
  KernelsService kernels;
  EventsService events;
  GraphsService graphs;
  DaemonStatusService status;
  AdminService admin;
};

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(
    Core& core, const std::string& socket_path, unsigned socket_mode,
    const BoundSocketOptions& bound,
    const std::optional<RemoteListener>& remote, int inherited_fd,
    bool executor_rings) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto services = std::make_unique<Services>(core, executor_rings);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  int remote_port = 0;
  if (remote) {
    grpc::SslServerCredentialsOptions tls(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = remote->client_ca_pem;
    tls.pem_key_cert_pairs.push_back({remote->key_pem, remote->cert_pem});
    builder.AddListeningPort(remote->address, grpc::SslServerCredentials(tls),
                             &remote_port);
  }
  builder.RegisterService(&services->sessions);
  builder.RegisterService(&services->devices);
  builder.RegisterService(&services->buffers);
  builder.RegisterService(&services->streams);
  builder.RegisterService(&services->kernels);
  builder.RegisterService(&services->events);
  builder.RegisterService(&services->graphs);
  builder.RegisterService(&services->status);
  builder.RegisterService(&services->admin);
  // No listening port: LocalListener accepts connections itself, to read
  // each caller's credentials, and hands them to this server.
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (remote && remote_port == 0)) {
    return Refusal(
        Reason::kServerFailed,
        absl::StrFormat("gRPC could not start the server%s. Fix: check the "
                        "address is free and the TLS files are valid PEM.",
                        remote ? " on " + remote->address : ""));
  }
  services->buffers.set_fd_socket(shared::SideChannelPath(socket_path));
  services->streams.set_fd_socket(shared::SideChannelPath(socket_path));
  auto fd_channel =
      FdChannel::Start(shared::SideChannelPath(socket_path), socket_mode, core);
  if (!fd_channel.ok()) return fd_channel.status();
  // Whoever may connect to the main socket may redeem on the side channel:
  // give it the main socket's group (under socket activation, the unit's
  // SocketGroup). Best effort: without it only the daemon's group can.
  struct stat main_socket {};
  if (stat(socket_path.c_str(), &main_socket) == 0 &&
      main_socket.st_gid != getegid()) {
    (void)!chown(shared::SideChannelPath(socket_path).c_str(), -1,
                 main_socket.st_gid);
  }
  auto bound_sockets =
      std::make_unique<BoundSockets>(bound, *server, services->peers, core);
  services->admin.set_bound_sockets(bound_sockets.get());
  auto listener =
      inherited_fd >= 0
          ? LocalListener::FromFd(inherited_fd, *server, services->peers, core)
          : LocalListener::Start(socket_path, socket_mode, *server,
                                 services->peers, core);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<DaemonServer>(new DaemonServer(
      std::move(services), std::move(server), std::move(bound_sockets),
      *std::move(listener), *std::move(fd_channel)));
}

DaemonServer::DaemonServer(std::unique_ptr<Services> services,
                           std::unique_ptr<grpc::Server> server,
                           std::unique_ptr<BoundSockets> bound,
                           std::unique_ptr<LocalListener> listener,
                           std::unique_ptr<FdChannel> fd_channel)
    : services_(std::move(services)),
      server_(std::move(server)),
      bound_(std::move(bound)),
      listener_(std::move(listener)),
      fd_channel_(std::move(fd_channel)) {}

DaemonServer::~DaemonServer() { Shutdown(absl::ZeroDuration()); }

void DaemonServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  listener_.reset();  // no new connections
  fd_channel_.reset();
  bound_->StopAll();  // bound tenants' sockets too (their directories stay)
  if (auto* health = server_->GetHealthCheckService()) {
    health->Shutdown();  // health checks report NOT_SERVING from here on
  }
  // Ring clients learn at once, as calls in flight do from the server.
  services_->rings.StopAll();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  // Rings are not calls: they end here, each draining its stream.
  services_->rings.Shutdown();
  server_.reset();
}

}  // namespace hrx::daemon
