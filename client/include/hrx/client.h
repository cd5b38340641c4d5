// libhrx: the client library of the hrx GPU daemon. A program connects to
// the daemon, opens its device and creates streams, much as it would with an
// in-process GPU runtime:
//
//   auto client = hrx::Client::Connect();           // HRXD_SOCKET or default
//   auto device = (*client)->OpenDevice(0);
//   auto stream = device->CreateStream();
//   auto buffer = stream->Allocate(1 << 20);
//   stream->Fill(buffer->Binding(), 0xab);
//   stream->Synchronize();
//
// Every call returns absl::Status or absl::StatusOr; refusals carry the
// canonical gRPC code and a message ending in "Fix: ...".
//
// No call waits without bound: a blocking call waits until the deadline it
// is given, else for the client's default_timeout, and then returns
// DEADLINE_EXCEEDED ("deadline_exceeded") naming what it waited for. A
// stream stays usable after one (the daemon still runs the work); a stream's
// destructor waits at most default_timeout for the daemon to drain it.
//
// Threading: Client and Device are thread-safe; see stream.h for streams.
#ifndef HRX_CLIENT_INCLUDE_HRX_CLIENT_H_
#define HRX_CLIENT_INCLUDE_HRX_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hrx/buffer.h"
#include "hrx/event.h"
#include "hrx/graph.h"
#include "hrx/kernel.h"
#include "hrx/stream.h"

namespace hrx {

struct DeviceInfo {
  std::string backend;  // "cpu" or "hip"
  std::string name;
  std::string target;  // exact compiler target
  uint64_t memory_bytes = 0;
  uint32_t queue_count = 0;
};

// Longer than the executor watchdog's default (30 s, which ends a hung
// kernel with "executor_lost"), so by default this bound fires only when the
// daemon itself stops answering or the work is legitimately longer.
inline constexpr absl::Duration kDefaultTimeout = absl::Seconds(60);

// How a stream's commands and replies travel to hrxd. Both carry the same
// messages with the same checks; the ring skips gRPC on every round trip.
enum class Transport {
  // The stream's shared-memory ring when hrxd offers one, else a gRPC call.
  // $HRX_TRANSPORT ("ring" or "grpc") replaces kAuto when set.
  kAuto,
  // The ring only: CreateStream fails when hrxd cannot give one.
  kRing,
  // A Streams.Open gRPC call.
  kGrpc,
};

struct ConnectOptions {
  std::string socket_path;  // else $HRXD_SOCKET, else the per-user default
  std::string client_name;
  // Bound on every blocking call not given a deadline of its own;
  // absl::InfiniteDuration() waits without bound.
  absl::Duration default_timeout = kDefaultTimeout;
  Transport transport = Transport::kAuto;
};

class Device {
 public:
  const DeviceInfo& info() const { return info_; }
  const std::string& target() const { return info_.target; }

  // A stream on the daemon's bounded queue pool (round-robin).
  absl::StatusOr<Stream> CreateStream() const;

  // Sizes the daemon's queue pool (8 by default), shared by every stream of
  // every session. Only before the first stream exists: afterwards a
  // different count is FAILED_PRECONDITION ("queue_pool_busy"); repeating
  // the current count is allowed.
  absl::Status SetStreamQueueCount(uint32_t count) const;
  absl::StatusOr<uint32_t> StreamQueueCount() const;

 private:
  friend class Client;
  Device(std::shared_ptr<client::internal::Connection> connection,
         DeviceInfo info)
      : connection_(std::move(connection)), info_(std::move(info)) {}
  std::shared_ptr<client::internal::Connection> connection_;
  DeviceInfo info_;
};

class Client {
 public:
  // Opens a session with the daemon at `socket_path`, else $HRXD_SOCKET,
  // else the default per-user socket. UNAVAILABLE naming the path when no
  // daemon answers there.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& socket_path = "", const std::string& client_name = "");
  // INVALID_ARGUMENT for a default_timeout that is not positive.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const ConnectOptions& options);

  // NOT_FOUND for an index the daemon does not have (it owns device 0).
  absl::StatusOr<Device> OpenDevice(int index) const;
  // As OpenDevice, and FAILED_PRECONDITION ("target_mismatch") naming the
  // found target when it is not `target`.
  absl::StatusOr<Device> OpenDeviceFor(int index,
                                       const std::string& target) const;

  const Handle& session() const;
  absl::Duration default_timeout() const;
  const std::string& socket_path() const;

 private:
  explicit Client(std::shared_ptr<client::internal::Connection> connection)
      : connection_(std::move(connection)) {}
  std::shared_ptr<client::internal::Connection> connection_;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_CLIENT_H_
