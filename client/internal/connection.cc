#include "client/internal/connection.h"

#include <sys/stat.h>

#include <atomic>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "shared/grpc_status.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"

namespace hrx::client::internal {
namespace {

// How long Open waits for the daemon to answer before reporting UNAVAILABLE.
constexpr auto kConnectTimeout = std::chrono::seconds(5);
// How long ProbeSession waits: longer than the channel's longest reconnect
// backoff (below), so a daemon restarted meanwhile is reached even when the
// channel has been backing off since the old one died. Its answer is reused
// for kProbeInterval: a process whose daemon is gone spends at most half its
// time asking why.
constexpr absl::Duration kProbeTimeout = absl::Milliseconds(2500);
constexpr absl::Duration kProbeInterval = absl::Seconds(5);

uint64_t NextBrand() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

void ToProto(const shared::WireHandle& handle, hrx::v1::Handle* out) {
  out->set_instance(handle.instance);
  out->set_session(handle.session);
  out->set_object(handle.object);
  out->set_tag(handle.tag);
}

void ToProto(const View& view, hrx::v1::View* out) {
  ToProto(view.buffer_handle(), out->mutable_buffer());
  out->set_offset(view.offset());
  out->set_length(view.length());
}

shared::WireHandle FromProto(const hrx::v1::Handle& handle) {
  return shared::WireHandle{handle.instance(), handle.session(),
                            handle.object(), handle.tag()};
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& socket_path) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxReplyBytes);
  arguments.SetMaxSendMessageSize(kMaxReplyBytes);
  // hrxd binds a session to its connection: a channel must not drop an idle
  // connection (gRPC's default after 30 minutes) under a live session.
  arguments.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
                   std::numeric_limits<int>::max());
  // A local daemon restarts in well under a second (systemd): reconnect
  // soon after it, rather than after gRPC's default 1 s, doubling to 120 s.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(absl::StrCat("unix:", socket_path),
                                   grpc::InsecureChannelCredentials(),
                                   arguments);
}

absl::Status CallStatus(const grpc::Status& status,
                        const std::string& socket_path) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
      status.error_code() != grpc::StatusCode::CANCELLED) {
    return shared::FromGrpcStatus(status);
  }
  if (absl::Status refusal = shared::FromGrpcStatus(status);
      ReasonOf(refusal).has_value()) {
    return refusal;  // the daemon's own (shutting_down, executor_lost...)
  }
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    // libhrx cancels no unary call: the daemon's server ended it, which it
    // does to calls in flight when it stops.
    return Refusal(
        Reason::kDaemonUnreachable,
        absl::StrFormat("hrxd at %s ended the call before answering it "
                        "(CANCELLED): it is stopping or restarting. Fix: "
                        "wait for it to run again (hrxctl status), then "
                        "reconnect and recreate your objects.",
                        socket_path));
  }
  struct stat info {};
  const bool exists = stat(socket_path.c_str(), &info) == 0;
  // Accepted, then closed before the protocol began: hrxd's admission (it
  // cannot say why before HTTP/2 starts), or hrxd going down. gRPC reports
  // it by what its next read or write met.
  const std::string& error = status.error_message();
  if (exists && (absl::StrContains(error, "Socket closed") ||
                 absl::StrContains(error, "Broken pipe") ||
                 absl::StrContains(error, "Connection reset"))) {
    return Refusal(
        Reason::kDaemonUnreachable,
        absl::StrFormat(
            "hrxd at %s accepted the connection and closed it before "
            "answering (%s). It does so to connections past its limits "
            "(connections per uid, in all, or the tenant's connections "
            "ceiling; docs/limits.md), naming the limit in its log, and "
            "when it is stopping. Fix: close the connections this account no "
            "longer uses (one Client per process is enough) or ask for a "
            "higher connections ceiling; hrxctl status shows whether hrxd "
            "runs.",
            socket_path, status.error_message()));
  }
  return Refusal(
      Reason::kDaemonUnreachable,
      absl::StrFormat(
          "no hrxd answers at %s (%s; %s). Fix: start the "
          "daemon (make run), or point %s or --socket at the socket it prints.",
          socket_path,
          exists ? "the socket file exists" : "no such socket file",
          status.error_message(), shared::kSocketEnvVar));
}

absl::Status Connection::Check(const grpc::Status& status,
                               const char* what) const {
  // Only gRPC's own deadline is rewritten; a daemon's refusal keeps its
  // reason.
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
      ReasonOf(shared::FromGrpcStatus(status)).has_value()) {
    return CallStatus(status, socket_path_);
  }
  return Refusal(
      Reason::kDeadlineExceeded,
      absl::StrFormat("hrxd at %s did not answer %s by its deadline (%s). "
                      "Fix: pass a later deadline or raise "
                      "ConnectOptions::default_timeout (now %s); if the daemon "
                      "is stuck, check it with hrxctl status.",
                      socket_path_, what, status.error_message(),
                      absl::FormatDuration(default_timeout_)));
}

absl::StatusOr<std::shared_ptr<Connection>> Connection::Open(
    const std::string& socket_path, const std::string& client_name,
    absl::Duration default_timeout, Transport transport) {
  // Never talk to a daemon someone else could have planted.
  if (absl::Status trusted = shared::CheckTrustedSocket(socket_path);
      !trusted.ok()) {
    return trusted;
  }
  std::shared_ptr<grpc::Channel> channel = MakeChannel(socket_path);
  auto sessions = hrx::v1::Sessions::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kConnectTimeout);
  hrx::v1::OpenSessionRequest request;
  request.set_client_name(client_name);
  hrx::v1::OpenSessionResponse response;
  const grpc::Status status =
      sessions->OpenSession(&context, request, &response);
  if (!status.ok()) return CallStatus(status, socket_path);
  return std::shared_ptr<Connection>(new Connection(
      socket_path, std::move(channel), FromProto(response.session()),
      default_timeout, transport));
}

Connection::Connection(std::string socket_path,
                       std::shared_ptr<grpc::Channel> channel,
                       shared::WireHandle session,
                       absl::Duration default_timeout, Transport transport)
    : socket_path_(std::move(socket_path)),
      channel_(std::move(channel)),
      session_(session),
      brand_(NextBrand()),
      default_timeout_(default_timeout),
      transport_(transport),
      sessions_(hrx::v1::Sessions::NewStub(channel_)),
      buffers_(hrx::v1::Buffers::NewStub(channel_)),
      streams_(hrx::v1::Streams::NewStub(channel_)),
      devices_(hrx::v1::Devices::NewStub(channel_)),
      kernels_(hrx::v1::Kernels::NewStub(channel_)),
      events_(hrx::v1::Events::NewStub(channel_)),
      graphs_(hrx::v1::Graphs::NewStub(channel_)) {}

Connection::~Connection() {
  auto context = Context();
  hrx::v1::CloseSessionRequest request;
  hrx::v1::CloseSessionResponse response;
  // Best effort: a daemon that is gone has nothing left to close.
  (void)sessions_->CloseSession(context.get(), request, &response);
}

std::unique_ptr<grpc::ClientContext> Connection::Context(
    absl::Time deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (deadline != absl::InfiniteFuture()) {
    context->set_deadline(absl::ToChronoTime(deadline));
  }
  context->AddMetadata(shared::kSessionMetadataKey,
                       shared::FormatWireHandle(session_));
  return context;
}

absl::Status Connection::ProbeSession() const {
  {
    absl::MutexLock lock(&probe_mu_);
    if (absl::Now() < next_probe_) return last_probe_;
  }
  const absl::Time deadline = absl::Now() + kProbeTimeout;
  absl::Status status;
  // Twice at most: a channel that has not noticed its daemon die (nothing
  // crossed it since; a stream on the shared-memory ring sends nothing over
  // gRPC) fails the first call on the dead connection ("Broken pipe"),
  // which makes it reconnect for the second.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto context = Context(deadline);
    // A channel whose daemon just went away backs off before reconnecting;
    // without waiting for it the probe would fail at once, unanswered.
    context->set_wait_for_ready(true);
    // Event 0 is never issued (ids start at 1): the daemon checks the
    // session and then answers unknown_event, which means it is good.
    hrx::v1::EventRequest request;
    request.set_event(0);
    hrx::v1::QueryEventResponse response;
    status = Check(events_->QueryEvent(context.get(), request, &response),
                   "a session probe");
    if (ReasonOf(status) != Reason::kDaemonUnreachable) break;
  }
  if (ReasonOf(status) == Reason::kUnknownEvent) status = absl::OkStatus();
  absl::MutexLock lock(&probe_mu_);
  last_probe_ = status;
  next_probe_ = absl::Now() + kProbeInterval;
  return status;
}

void Connection::Register(std::weak_ptr<StreamBatch> batch) {
  absl::MutexLock lock(&mu_);
  batches_.push_back(std::move(batch));
}

absl::Status Connection::FlushAll() {
  std::vector<std::shared_ptr<StreamBatch>> live;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::weak_ptr<StreamBatch>> kept;
    for (auto& weak : batches_) {
      if (auto batch = weak.lock()) {
        live.push_back(std::move(batch));
        kept.push_back(std::move(weak));
      }
    }
    batches_ = std::move(kept);
  }
  absl::Status first_error;
  for (auto& batch : live) {
    absl::Status flushed = batch->Flush();
    if (!flushed.ok() && first_error.ok()) first_error = flushed;
  }
  return first_error;
}

}  // namespace hrx::client::internal
