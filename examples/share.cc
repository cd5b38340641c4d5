// share: two processes share one buffer. The owner allocates host-coherent
// memory, maps it and writes into it; it grants the buffer to the other
// process's session; the other process imports it, maps it too, works on it
// on the device and records an event, and the owner sees the result through
// its own mapping once that event has completed.
//
// Run against `make run`'s daemon (in another terminal):
//   bazel run //examples:share
// The two processes are this program and a child it forks before either
// connects (a process must not fork after it starts using gRPC). They talk
// over two pipes: session id one way, grant id the other, then "done".
// Both run as the same user, hence the same tenant; granting to another
// tenant is Buffer::GrantToTenant (docs/security.md).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "example_util.h"
#include "hrx/client.h"

using hrx_examples::Check;

namespace {

constexpr uint64_t kBytes = 64 << 10;

void Send(int fd, uint64_t value) {
  if (write(fd, &value, sizeof(value)) != sizeof(value)) {
    std::perror("write");
    std::exit(1);
  }
}

uint64_t Receive(int fd) {
  uint64_t value = 0;
  if (read(fd, &value, sizeof(value)) != sizeof(value)) {
    std::fprintf(stderr, "the other process ended early\n");
    std::exit(1);
  }
  return value;
}

// The child: imports the grant, checks the owner's bytes through its own
// mapping, fills the first half on the device, and reports when its event
// has completed.
int Consumer(int to_owner, int from_owner) {
  auto client = Check(hrx::Client::Connect(), "consumer connect");
  auto stream =
      Check(Check(client->OpenDevice(0), "open device").CreateStream(),
            "create stream");
  Send(to_owner, client->session().session);

  auto buffer = Check(stream.Import(Receive(from_owner)), "import");
  auto mapping = Check(buffer.Map(), "consumer map");
  bool owner_bytes = true;
  for (uint64_t i = 0; i < kBytes; ++i) {
    owner_bytes = owner_bytes && mapping.bytes()[i] == uint8_t(i * 7 + 1);
  }
  std::printf("consumer: the owner's bytes are %s\n",
              owner_bytes ? "visible" : "WRONG");

  auto half = Check(buffer.Slice(0, kBytes / 2), "slice");
  Check(stream.Fill(half, 0xee), "fill");
  // An event marks this point of the stream; waiting on it (not on the
  // whole stream) is what tells us the fill has run.
  auto filled = Check(stream.RecordEvent(), "record event");
  Check(filled.Synchronize(), "wait for the event");
  Send(to_owner, owner_bytes ? 1 : 0);
  return owner_bytes ? 0 : 1;
}

}  // namespace

int main() {
  int to_owner[2], from_owner[2];
  if (pipe(to_owner) != 0 || pipe(from_owner) != 0)
    return std::perror("pipe"), 1;
  const pid_t child = fork();
  if (child < 0) return std::perror("fork"), 1;
  // Each side closes the ends it does not use, so that a read sees the end
  // of the pipe (and fails) when the other process dies.
  if (child == 0) {
    close(to_owner[0]);
    close(from_owner[1]);
    return Consumer(to_owner[1], from_owner[0]);
  }
  close(to_owner[1]);
  close(from_owner[0]);

  auto client = Check(hrx::Client::Connect(), "owner connect");
  auto stream =
      Check(Check(client->OpenDevice(0), "open device").CreateStream(),
            "create stream");
  // Shared placement: memory both the device and mappings see.
  auto buffer = Check(stream.AllocateShared(kBytes), "allocate shared");
  auto mapping = Check(buffer.Map(), "owner map");
  for (uint64_t i = 0; i < kBytes; ++i) mapping.bytes()[i] = uint8_t(i * 7 + 1);

  // A grant names one session (or a tenant); the grantee imports it with
  // its own handle, which the daemon brands for that session alone.
  const uint64_t consumer_session = Receive(to_owner[0]);
  Send(from_owner[1], Check(buffer.GrantToSession(consumer_session), "grant"));
  const bool consumer_ok = Receive(to_owner[0]) == 1;

  bool filled = true, tail_intact = true;
  for (uint64_t i = 0; i < kBytes / 2; ++i)
    filled &= mapping.bytes()[i] == 0xee;
  for (uint64_t i = kBytes / 2; i < kBytes; ++i)
    tail_intact &= mapping.bytes()[i] == uint8_t(i * 7 + 1);
  std::printf("owner: the consumer's fill is %s, the rest %s\n",
              filled ? "visible" : "MISSING",
              tail_intact ? "intact" : "CHANGED");
  int status = 0;
  waitpid(child, &status, 0);
  const bool ok = consumer_ok && filled && tail_intact && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0;
  std::printf("share: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
