// One client session with the daemon: the channel, the stubs and the session
// handle sent as metadata on every call. Shared by the Client and every
// Buffer and Stream it made; the session closes when the last one goes.
//
// Thread-safe.
#ifndef HRX_CLIENT_INTERNAL_CONNECTION_H_
#define HRX_CLIENT_INTERNAL_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "hrx/buffer.h"
#include "hrx/client.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "hrx/v1/device.grpc.pb.h"
#include "hrx/v1/event.grpc.pb.h"
#include "hrx/v1/graph.grpc.pb.h"
#include "hrx/v1/kernel.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "hrx/v1/status.grpc.pb.h"
#include "hrx/v1/stream.grpc.pb.h"
#include "shared/handle.h"
#include "shared/socket_path.h"

namespace hrx::client::internal {

void ToProto(const shared::WireHandle& handle, hrx::v1::Handle* out);
void ToProto(const View& view, hrx::v1::View* out);
shared::WireHandle FromProto(const hrx::v1::Handle& handle);

// Largest reply the client accepts; above the daemon's 8 MiB inline read.
inline constexpr int kMaxReplyBytes = 16 << 20;

// A channel to the daemon at `socket_path`, with the client's message limits.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& socket_path);

// Rewrites a failed call's status so that an unreachable daemon names the
// socket path (UNAVAILABLE, "daemon_unreachable").
absl::Status CallStatus(const grpc::Status& status,
                        const std::string& socket_path);

// Pending commands of one stream, sent (and acknowledged, so that later
// unary calls are ordered after them) before anything that must observe
// them: a buffer's free, an event's query or release, a kernel's unload.
class StreamBatch {
 public:
  virtual ~StreamBatch() = default;
  virtual absl::Status Flush() = 0;
};

class Connection {
 public:
  // Opens a session; UNAVAILABLE naming the path when no daemon answers.
  static absl::StatusOr<std::shared_ptr<Connection>> Open(
      const std::string& socket_path, const std::string& client_name,
      absl::Duration default_timeout, Transport transport);
  ~Connection();  // closes the session (the daemon drains its work)

  // A context carrying the session metadata, ending at `deadline` (by
  // default, Deadline()).
  std::unique_ptr<grpc::ClientContext> Context() const {
    return Context(Deadline());
  }
  std::unique_ptr<grpc::ClientContext> Context(absl::Time deadline) const;
  // The deadline of a blocking call given none: now + default_timeout().
  absl::Time Deadline() const { return absl::Now() + default_timeout_; }
  absl::Duration default_timeout() const { return default_timeout_; }
  // A caller's deadline, with kDefaultDeadline replaced by Deadline().
  absl::Time Resolve(absl::Time deadline) const {
    return deadline == absl::InfinitePast() ? Deadline() : deadline;
  }
  // A call's status as a libhrx refusal; `what` names the call when it ran
  // past its deadline (DEADLINE_EXCEEDED, "deadline_exceeded").
  absl::Status Check(const grpc::Status& status,
                     const char* what = "a call") const;

  hrx::v1::Buffers::Stub& buffers() { return *buffers_; }
  hrx::v1::Streams::Stub& streams() { return *streams_; }
  hrx::v1::Devices::Stub& devices() { return *devices_; }
  hrx::v1::Kernels::Stub& kernels() { return *kernels_; }
  hrx::v1::Events::Stub& events() { return *events_; }
  hrx::v1::Graphs::Stub& graphs() { return *graphs_; }

  // A fresh event id for this session (the daemon checks uniqueness too).
  uint64_t NextEventId() { return next_event_id_.fetch_add(1); }

  const shared::WireHandle& session() const { return session_; }
  // Process-local identity that brands this connection's buffers and
  // streams, so they are never mixed with another Client's.
  uint64_t brand() const { return brand_; }
  const std::string& socket_path() const { return socket_path_; }
  // The descriptor side channel beside the socket this client connected to
  // (the daemon's fd_socket names its own path, which differs wherever the
  // socket's directory is mounted elsewhere, as in a container).
  std::string fd_socket() const {
    return shared::SideChannelPath(socket_path_);
  }
  // How new streams travel (never kAuto from $HRX_TRANSPORT: resolved).
  Transport transport() const { return transport_; }

  // Why the session's calls fail, asked of the daemon with a cheap call
  // (waiting at most 2.5 s; an answer is reused for 5 s): OK when it
  // answers, "previous_daemon_run" when a restarted daemon no longer knows
  // the session.
  absl::Status ProbeSession() const;

  // Streams with unsent commands register here; FlushAll sends them, so a
  // buffer is never freed ahead of commands the client already issued.
  void Register(std::weak_ptr<StreamBatch> batch);
  absl::Status FlushAll();

 private:
  Connection(std::string socket_path, std::shared_ptr<grpc::Channel> channel,
             shared::WireHandle session, absl::Duration default_timeout,
             Transport transport);

  const std::string socket_path_;
  const std::shared_ptr<grpc::Channel> channel_;
  const shared::WireHandle session_;
  const uint64_t brand_;
  const absl::Duration default_timeout_;
  const Transport transport_;
  const std::unique_ptr<hrx::v1::Sessions::Stub> sessions_;
  const std::unique_ptr<hrx::v1::Buffers::Stub> buffers_;
  const std::unique_ptr<hrx::v1::Streams::Stub> streams_;
  const std::unique_ptr<hrx::v1::Devices::Stub> devices_;
  const std::unique_ptr<hrx::v1::Kernels::Stub> kernels_;
  const std::unique_ptr<hrx::v1::Events::Stub> events_;
  const std::unique_ptr<hrx::v1::Graphs::Stub> graphs_;
  std::atomic<uint64_t> next_event_id_{1};

  absl::Mutex mu_;
  std::vector<std::weak_ptr<StreamBatch>> batches_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex probe_mu_;
  mutable absl::Status last_probe_ ABSL_GUARDED_BY(probe_mu_);
  mutable absl::Time next_probe_ ABSL_GUARDED_BY(probe_mu_) =
      absl::InfinitePast();
};

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_CONNECTION_H_
