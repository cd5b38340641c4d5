// Fuzzes a ring as an executor serves it (daemon/executor/executor_sessions.h,
// the default for a tenant whose work runs in an executor): the client's
// bytes go through the executor's ring thread, its reader and decoder, the
// command path over its copies of the session's tables, and its asks to hrxd
// about handles it does not hold (answered here as hrxd answers a handle it
// never sealed: forged_handle). The executor runs the tenant's code and is
// its own victim here; what the harness checks is that hostile ring bytes
// neither crash it nor hang its ring.
//
// Input: a first byte choosing the framing (even: each message framed as
// libhrx frames it, from u16-length-prefixed chunks of the rest; odd: the
// rest written raw into the submit pipe with a written position of its own).
// Checks: the ring consumes what it was given or ends with a catalogued ring
// or decoding reason; after the client's half-close it always finishes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/executor/executor_sessions.h"
#include "daemon/stream/ring_server.h"
#include "hrx/executor/v1/executor.pb.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "shared/shm_ring.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

namespace shared = hrx::shared;
namespace wire = hrx::executor::v1;
using hrx::Reason;

// Ids as hrxd's tables issue them (kind, slot, generation).
const uint64_t kSession =
    shared::Handle{shared::HandleKind::kSession, 3, 1}.Encode();
const uint64_t kStreamObject =
    shared::Handle{shared::HandleKind::kStream, 5, 1}.Encode();
// How long the ring may take to consume an input, or to finish after the
// client's half-close: // far past what any input needs, and within libFuzzer's
// -timeout=10 for both waits together.
constexpr absl::Duration kHangLimit = absl::Seconds(4);

std::shared_ptr<hrx::backend::Backend> Backend() {
  static auto* backend = new std::shared_ptr<hrx::backend::Backend>(
      std::make_shared<hrx::backend::CpuBackend>(
          hrx::backend::CpuBackendOptions{uint64_t{256} << 20}));
  return *backend;
}

bool CataloguedEnd(const shared::RingHeader& header) {
  const auto code = static_cast<absl::StatusCode>(header.finish_code.load());
  return code == absl::StatusCode::kOk || code == absl::StatusCode::kDataLoss ||
         code == absl::StatusCode::kResourceExhausted ||
         code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kUnavailable;
}

// Takes the replies off the complete pipe, as a client reads them.
void DrainReplies(void* base) {
  shared::RingHeader& header = *static_cast<shared::RingHeader*>(base);
  header.complete_read.value.store(header.complete_written.value.load());
  shared::RingDoorbell(header.daemon_bell);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  hrx::executor::ExecutorSessions sessions(
      Backend(),
      [](const shared::WireHandle&, uint64_t, shared::HandleKind,
         std::string_view what) -> absl::StatusOr<uint64_t> {
        return hrx::Refusal(Reason::kForgedHandle,
                            std::string(what) +
                                ": the handle was not sealed by this daemon. "
                                "Fix: use handles the daemon returned.");
      },
      [](uint64_t, uint64_t) {},
      [](uint64_t, const std::vector<uint64_t>&, bool) {});
  wire::OpenSession open;
  open.set_session(kSession);
  open.set_tenant("fuzz");
  HRX_FUZZ_CHECK(sessions.Open(open).ok());
  auto region = hrx::daemon::CreateRingRegion("fuzz ring");
  HRX_FUZZ_CHECK(region.ok());
  wire::ServeRing serve;
  serve.set_session(kSession);
  serve.mutable_stream()->set_session(kSession);
  serve.mutable_stream()->set_object(kStreamObject);
  serve.mutable_stream()->set_tag(0x5eed);
  serve.set_stream_id(1);
  serve.set_region_bytes(region->bytes);
  HRX_FUZZ_CHECK(sessions.ServeRing(serve, std::move(region->fd)).ok());
  void* base = region->base;
  shared::RingHeader& header = *static_cast<shared::RingHeader*>(base);

  uint64_t written = 0;
  if ((data[0] & 1) == 0) {
    shared::MessageWriter writer(shared::SubmitWriter(base));
    size_t at = 1;
    while (at + 2 <= size) {
      size_t length = data[at] | (size_t{data[at + 1]} << 8);
      at += 2;
      length = std::min(length, size - at);
      auto started = writer.Start(
          std::string(reinterpret_cast<const char*>(data + at), length));
      at += length;
      const absl::Time limit = absl::Now() + kHangLimit;
      while (started.ok() && !*started && absl::Now() < limit) {
        shared::RingDoorbell(header.daemon_bell);
        DrainReplies(base);
        if (header.finished.load()) break;
        started = writer.Continue();
      }
      if (!started.ok() || header.finished.load()) break;
      HRX_FUZZ_CHECK(*started);
    }
    written = header.submit_written.value.load();
  } else {
    const size_t body = std::min<size_t>(size - 1, shared::kRingSubmitBytes);
    std::memcpy(static_cast<uint8_t*>(base) + header.submit_offset, data + 1,
                body);
    written = data[0] & 2 ? body : uint64_t{data[0]} << 13;
    header.submit_written.value.store(written);
  }
  shared::RingDoorbell(header.daemon_bell);
  // Consumed, or ended: never neither.
  const absl::Time limit = absl::Now() + kHangLimit;
  while (header.submit_read.value.load() < written && !header.finished.load() &&
         absl::Now() < limit) {
    DrainReplies(base);
    absl::SleepFor(absl::Microseconds(200));
  }
  HRX_FUZZ_CHECK(header.submit_read.value.load() >= written ||
                 header.finished.load());
  // The client's half-close: the ring finishes, with a catalogued end.
  header.client_closed.store(1);
  shared::RingDoorbell(header.daemon_bell);
  const absl::Time closing = absl::Now() + kHangLimit;
  while (!header.finished.load() && absl::Now() < closing) {
    DrainReplies(base);
    absl::SleepFor(absl::Microseconds(200));
  }
  HRX_FUZZ_CHECK(header.finished.load());
  HRX_FUZZ_CHECK(CataloguedEnd(header));
  wire::EndSession end;
  end.set_session(kSession);
  sessions.End(end);
  munmap(base, region->bytes);
  return 0;
}
