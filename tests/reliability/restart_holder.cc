// A libhrx client that holds a stream and a buffer across a daemon restart.
// It connects, allocates, fills and reads back, prints its handles
// ("session:", "stream:", "buffer:" in the wire form of shared/handle.h) and
// "ready: yes", waits for --go (a file), and then calls the daemon again
// through what it held, printing each answer as
// "result NAME: CODE REASON | MESSAGE" (REASON: the refusal's reason token,
// or "other"):
//
//   stream_fill_synchronize  a fill on the held stream, then Synchronize
//   stream_synchronize_again Synchronize once more on that stream
//   allocate                 a new buffer through the held session
//   free                     freeing the held buffer
//   create_stream            a new stream through the held session
//   reconnect                a new Client, stream, fill and read back
//
//   restart_holder --socket=PATH --go=FILE
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hrx/client.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "tests/program_io.h"

namespace {

using hrx::testing::Flag;
using hrx::testing::Say;

void Result(const std::string& name, const absl::Status& status) {
  Say("result " + name,
      status.ok() ? "OK"
                  : absl::StrCat(absl::StatusCodeToString(status.code()), " ",
                                 std::string(hrx::ReasonToken(status)), " | ",
                                 status.message()));
}

absl::Status RoundTrip(const std::string& socket) {
  auto client = hrx::Client::Connect(socket, "restart_holder reconnect");
  if (!client.ok()) return client.status();
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return device.status();
  auto stream = device->CreateStream();
  if (!stream.ok()) return stream.status();
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return buffer.status();
  if (absl::Status s = stream->Fill(buffer->Binding(), 0x3c); !s.ok()) return s;
  std::vector<uint8_t> bytes(4096);
  if (absl::Status s = stream->ReadBlocking(buffer->Binding(), bytes); !s.ok())
    return s;
  if (bytes != std::vector<uint8_t>(4096, 0x3c))
    return absl::DataLossError("the reconnected client read wrong bytes");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string socket = Flag(argc, argv, "socket");
  auto client = hrx::Client::Connect(socket, "restart_holder");
  if (!client.ok()) return Result("connect", client.status()), 3;
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return Result("open_device", device.status()), 3;
  auto stream = device->CreateStream();
  if (!stream.ok()) return Result("create_stream", stream.status()), 3;
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return Result("allocate", buffer.status()), 3;
  std::vector<uint8_t> bytes(4096);
  if (absl::Status s = stream->Fill(buffer->Binding(), 0x5a); !s.ok())
    return Result("fill", s), 3;
  if (absl::Status s = stream->ReadBlocking(buffer->Binding(), bytes); !s.ok())
    return Result("read", s), 3;
  if (bytes != std::vector<uint8_t>(4096, 0x5a)) {
    Say("error", "wrong bytes before the restart");
    return 1;
  }
  Say("session", hrx::shared::FormatWireHandle((*client)->session()));
  Say("stream", hrx::shared::FormatWireHandle(stream->handle()));
  Say("buffer", hrx::shared::FormatWireHandle(buffer->handle()));
  Say("ready", "yes");

  const std::string go = Flag(argc, argv, "go");
  struct stat info {};
  for (int i = 0; stat(go.c_str(), &info) != 0; ++i) {
    if (i > 6000) return Say("error", "no --go within 60 s"), 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  absl::Status fill = stream->Fill(buffer->Binding(), 0x11);
  if (fill.ok()) fill = stream->Synchronize();
  Result("stream_fill_synchronize", fill);
  Result("stream_synchronize_again", stream->Synchronize());
  Result("allocate", stream->Allocate(64).status());
  Result("free", buffer->Free());
  Result("create_stream", device->CreateStream().status());
  Result("reconnect", RoundTrip(socket));
  Say("done", "yes");
  return 0;
}
