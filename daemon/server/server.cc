#include "daemon/server/server.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/server/services.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace hrx::daemon {

class Services {
 public:
  explicit Services(Core& core)
      : sessions(core),
        devices(core),
        buffers(core),
        streams(core),
        kernels(core),
        events(core),
        status(core) {}
  SessionsService sessions;
  DevicesService devices;
  BuffersService buffers;
  StreamsService streams;
  KernelsService kernels;
  EventsService events;
  DaemonStatusService status;
};

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(
    Core& core, const std::string& socket_path) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto services = std::make_unique<Services>(core);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path),
                           grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.RegisterService(&services->sessions);
  builder.RegisterService(&services->devices);
  builder.RegisterService(&services->buffers);
  builder.RegisterService(&services->streams);
  builder.RegisterService(&services->kernels);
  builder.RegisterService(&services->events);
  builder.RegisterService(&services->status);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "listen_failed: gRPC could not listen on unix:%s. Fix: check that the "
        "directory exists and is writable, and that the path is shorter than "
        "108 bytes.",
        socket_path));
  }
  return std::unique_ptr<DaemonServer>(
      new DaemonServer(std::move(services), std::move(server)));
}

DaemonServer::DaemonServer(std::unique_ptr<Services> services,
                           std::unique_ptr<grpc::Server> server)
    : services_(std::move(services)), server_(std::move(server)) {}

DaemonServer::~DaemonServer() { Shutdown(absl::ZeroDuration()); }

void DaemonServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  if (auto* health = server_->GetHealthCheckService()) {
    health->Shutdown();  // health checks report NOT_SERVING from here on
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
}

}  // namespace hrx::daemon
