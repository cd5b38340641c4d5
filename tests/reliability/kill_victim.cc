// A client process that the kill loop SIGKILLs at a random point. It
// connects with libhrx (after switching to --uid), sets up, prints
// "ready: yes", and then repeats the activity of its --mode until it is
// killed, so the kill lands somewhere inside that activity:
//
//   batch    batches of thousands of small fills and copies, flushed in part
//   upload   uploads of a 32 MiB buffer, through the shared staging region
//            and inline (1 MiB commands) in turn
//   mapping  holding a Mapping of a shared buffer, writing through it and
//            filling it on the device
//   sync     waiting on long work (256 MiB of fills): Synchronize or an
//            event's Synchronize in turn
//   export   exporting (Map: export, redeem the ticket, map) and granting
//            and revoking a shared buffer
//
//   kill_victim --socket=PATH --mode=MODE [--uid=N] [--tenant=NAME]
//
// A call that fails before the kill prints "error: ..." and exits 3.
#include <grp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hrx/client.h"
#include "tests/program_io.h"

namespace {

using hrx::testing::Flag;
using hrx::testing::Number;
using hrx::testing::Say;

int Die(const std::string& what, const absl::Status& status) {
  Say("error", absl::StrCat(what, ": ", hrx::testing::StatusText(status)));
  return 3;
}

#define CHECK_OK(what, expr)            \
  do {                                  \
    absl::Status s_ = (expr);           \
    if (!s_.ok()) return Die(what, s_); \
  } while (false)

int Batch(hrx::Stream& stream) {
  auto a = stream.AllocateZeroed(4 << 20);
  auto b = stream.AllocateZeroed(4 << 20);
  if (!a.ok()) return Die("allocate", a.status());
  if (!b.ok()) return Die("allocate", b.status());
  Say("ready", "yes");
  for (uint64_t i = 0;; ++i) {
    const uint64_t offset = (i % 64) * (64 << 10);
    auto piece = a->Slice(offset, 64 << 10);
    auto other = b->Slice(offset, 64 << 10);
    if (!piece.ok() || !other.ok()) return Die("slice", piece.status());
    CHECK_OK("fill", stream.Fill(*piece, static_cast<uint8_t>(i)));
    CHECK_OK("copy", stream.Copy(*other, *piece));
    if (i % 3000 == 2999) CHECK_OK("flush", stream.Flush());
  }
}

int Upload(hrx::Stream& stream) {
  constexpr uint64_t kBytes = 32 << 20;
  auto target = stream.Allocate(kBytes);
  if (!target.ok()) return Die("allocate", target.status());
  std::vector<uint8_t> payload(kBytes);
  for (uint64_t i = 0; i < kBytes; ++i) payload[i] = static_cast<uint8_t>(i);
  Say("ready", "yes");
  for (uint64_t i = 0;; ++i) {
    stream.SetSharedTransferThreshold(
        i % 2 == 0 ? hrx::kDefaultSharedTransferThreshold
                   : std::numeric_limits<uint64_t>::max());
    payload[0] = static_cast<uint8_t>(i);
    CHECK_OK("upload", stream.Upload(target->Binding(), payload));
    CHECK_OK("flush", stream.Flush());
  }
}

int Mapping(hrx::Stream& stream) {
  auto shared = stream.AllocateShared(8 << 20);
  if (!shared.ok()) return Die("allocate shared", shared.status());
  auto mapping = shared->Map();
  if (!mapping.ok()) return Die("map", mapping.status());
  Say("ready", "yes");
  for (uint64_t i = 0;; ++i) {
    std::memset(mapping->bytes().data(), static_cast<int>(i & 0xff),
                mapping->size());
    auto head = shared->Slice(0, 1 << 20);
    if (!head.ok()) return Die("slice", head.status());
    CHECK_OK("fill", stream.Fill(*head, static_cast<uint8_t>(i + 1)));
    CHECK_OK("synchronize", stream.Synchronize());
  }
}

int Sync(hrx::Stream& stream) {
  auto target = stream.Allocate(32 << 20);
  if (!target.ok()) return Die("allocate", target.status());
  for (uint64_t i = 0;; ++i) {
    for (int fill = 0; fill < 8; ++fill) {
      CHECK_OK("fill",
               stream.Fill(target->Binding(), static_cast<uint8_t>(i + fill)));
    }
    if (i == 0) Say("ready", "yes");
    if (i % 2 == 0) {
      CHECK_OK("synchronize", stream.Synchronize());
    } else {
      auto event = stream.RecordEvent();
      if (!event.ok()) return Die("record event", event.status());
      CHECK_OK("event synchronize", event->Synchronize());
    }
  }
}

int Export(hrx::Stream& stream, const std::string& tenant) {
  auto shared = stream.AllocateShared(1 << 20);
  if (!shared.ok()) return Die("allocate shared", shared.status());
  Say("ready", "yes");
  for (uint64_t i = 0;; ++i) {
    {
      auto mapping = shared->Map();
      if (!mapping.ok()) return Die("map", mapping.status());
      mapping->bytes()[i % mapping->size()] = static_cast<uint8_t>(i);
    }
    auto grant = shared->GrantToTenant(tenant);
    if (!grant.ok()) return Die("grant", grant.status());
    CHECK_OK("revoke", shared->Revoke(*grant));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t uid = Number(argc, argv, "uid", 0);
  if (uid != 0 &&
      (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 ||
       setuid(static_cast<uid_t>(uid)) != 0)) {
    Say("error", "cannot switch uid (run as root)");
    return 2;
  }
  const std::string mode = Flag(argc, argv, "mode");
  auto client =
      hrx::Client::Connect(Flag(argc, argv, "socket"), "kill_victim " + mode);
  if (!client.ok()) return Die("connect", client.status());
  auto device = (*client)->OpenDevice(0);
  if (!device.ok()) return Die("open device", device.status());
  auto stream = device->CreateStream();
  if (!stream.ok()) return Die("create stream", stream.status());
  if (mode == "batch") return Batch(*stream);
  if (mode == "upload") return Upload(*stream);
  if (mode == "mapping") return Mapping(*stream);
  if (mode == "sync") return Sync(*stream);
  if (mode == "export") return Export(*stream, Flag(argc, argv, "tenant"));
  Say("error", "unknown mode " + mode);
  return 2;
}
