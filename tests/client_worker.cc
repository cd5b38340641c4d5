// A client process for multi-process tests: connects to the daemon with
// libhrx, allocates, fills, uploads, copies and reads back, and checks every
// byte against what it computed locally. Exit 0 when all bytes match.
//
//   client_worker --socket=PATH --seed=N [--bytes=N] [--rounds=N] [--uid=N]
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "hrx/client.h"

namespace {

int Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "client_worker: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

#define CHECK_OK(what, expr)          \
  do {                                \
    absl::Status s = (expr);          \
    if (!s.ok()) return Die(what, s); \
  } while (false)

uint64_t Flag(int argc, char** argv, const std::string& name,
              uint64_t fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    uint64_t value = 0;
    if (arg.rfind(prefix, 0) == 0 &&
        absl::SimpleAtoi(arg.substr(prefix.size()), &value)) {
      return value;
    }
  }
  return fallback;
}

std::string SocketFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--socket=", 0) == 0) return arg.substr(9);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // Optionally run as another user (tests run as root and drop to a tenant).
  const uint64_t uid = Flag(argc, argv, "uid", 0);
  if (uid != 0 &&
      (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 ||
       setuid(static_cast<uid_t>(uid)) != 0)) {
    std::fprintf(stderr, "client_worker: cannot switch to uid %lu\n",
                 static_cast<unsigned long>(uid));
    return 2;
  }
  const uint64_t seed = Flag(argc, argv, "seed", 1);
  const uint64_t bytes = Flag(argc, argv, "bytes", (9 << 20) + 13);
  const uint64_t rounds = Flag(argc, argv, "rounds", 3);
  auto client = hrx::Client::Connect(SocketFlag(argc, argv),
                                     "client_worker " + std::to_string(seed));
  if (!client.ok()) return Die("connect", client.status());
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return Die("open device", device.status());
  auto stream = device->CreateStream();
  if (!stream.ok()) return Die("create stream", stream.status());

  for (uint64_t round = 0; round < rounds; ++round) {
    const uint8_t fill = static_cast<uint8_t>(seed * 31 + round);
    auto a = stream->AllocateZeroed(bytes);
    if (!a.ok()) return Die("allocate a", a.status());
    auto b = stream->Allocate(bytes);
    if (!b.ok()) return Die("allocate b", b.status());

    // Expected contents, computed locally: a fill, then an upload of a
    // seed-dependent pattern (large enough to span several upload chunks)
    // at an odd offset.
    std::vector<uint8_t> expected(bytes, fill);
    const uint64_t upload_offset = 7;
    const uint64_t upload_bytes = bytes / 3;
    std::vector<uint8_t> pattern(upload_bytes);
    for (uint64_t i = 0; i < upload_bytes; ++i) {
      pattern[i] = static_cast<uint8_t>((i * 131 + seed * 7 + round) >> 3);
      expected[upload_offset + i] = pattern[i];
    }

    CHECK_OK("fill", stream->Fill(a->Binding(), fill));
    auto upload_view = a->Slice(upload_offset, upload_bytes);
    if (!upload_view.ok()) return Die("slice", upload_view.status());
    CHECK_OK("upload", stream->Upload(*upload_view, pattern));
    CHECK_OK("copy", stream->Copy(b->Binding(), a->Binding()));

    std::vector<uint8_t> got(bytes);
    CHECK_OK("read_blocking", stream->ReadBlocking(b->Binding(), got));
    for (uint64_t i = 0; i < bytes; ++i) {
      if (got[i] != expected[i]) {
        std::fprintf(stderr,
                     "client_worker seed %lu round %lu: byte %lu is %u, "
                     "expected %u\n",
                     static_cast<unsigned long>(seed),
                     static_cast<unsigned long>(round),
                     static_cast<unsigned long>(i), got[i], expected[i]);
        return 1;
      }
    }
    // A queued readback of a tail slice, ordered before a later fill.
    auto tail = b->Slice(bytes - 64, 64);
    if (!tail.ok()) return Die("slice tail", tail.status());
    auto readback = stream->Read(*tail);
    if (!readback.ok()) return Die("read", readback.status());
    CHECK_OK("fill after read", stream->Fill(b->Binding(), 0));
    auto tail_bytes = readback->Wait(*stream);
    if (!tail_bytes.ok()) return Die("readback wait", tail_bytes.status());
    if (std::vector<uint8_t>(expected.end() - 64, expected.end()) !=
        *tail_bytes) {
      std::fprintf(stderr, "client_worker: readback tail mismatch\n");
      return 1;
    }
    CHECK_OK("synchronize", stream->Synchronize());
  }
  std::printf("client_worker seed %lu: %lu rounds of %lu bytes verified\n",
              static_cast<unsigned long>(seed),
              static_cast<unsigned long>(rounds),
              static_cast<unsigned long>(bytes));
  return 0;
}
