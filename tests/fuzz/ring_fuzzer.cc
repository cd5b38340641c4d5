// Fuzzes the stream ring as hrxd reads it: the client owns the submit pipe's
// bytes and its written position, so both come from the input. The daemon's
// reader takes framed messages off the pipe and parses each as a
// StreamRequest, exactly as a ring's serving thread does.
// Checks: every refusal carries a catalogued ring or decoding reason; no
// message is longer than the limit or than what was written; and messages
// the library's own writer frames come back byte for byte.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/stream/wire_shape.h"
#include "hrx/v1/stream.pb.h"
#include "shared/refusal.h"
#include "shared/shm_ring.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using hrx::Reason;
using hrx::ReasonOf;
namespace shared = hrx::shared;

constexpr uint64_t kPipeBytes = 512;
constexpr uint64_t kMaxMessage = 4096;

struct Region {
  Region() : memory(shared::RingRegionBytes(kPipeBytes, kPipeBytes) + 64) {
    auto at = reinterpret_cast<uintptr_t>(memory.data());
    base = reinterpret_cast<uint8_t*>((at + 63) & ~uintptr_t{63});
    shared::InitRingRegion(base, kPipeBytes, kPipeBytes);
  }
  shared::RingHeader& header() {
    return *reinterpret_cast<shared::RingHeader*>(base);
  }
  uint8_t* submit() { return base + header().submit_offset; }
  shared::PipeReader Reader() {
    return shared::PipeReader(submit(), kPipeBytes, &header().submit_written,
                              &header().submit_read);
  }
  std::vector<uint8_t> memory;
  uint8_t* base = nullptr;
};

bool RingOrDecodeReason(const absl::Status& status) {
  const auto reason = ReasonOf(status);
  return reason == Reason::kRingBroken ||
         reason == Reason::kRingMessageTooLarge ||
         reason == Reason::kMalformedRequest ||
         reason == Reason::kRequestTooComplex;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Hostile: a written position and the pipe's bytes, as a client sets them.
  {
    Region region;
    uint64_t written = 0;
    std::memcpy(&written, data, std::min<size_t>(size, 8));
    const size_t body = size > 8 ? size - 8 : 0;
    std::memcpy(region.submit(), data + 8, std::min<size_t>(body, kPipeBytes));
    // Mostly plausible positions (the bytes given), sometimes anything.
    if ((written & 1) == 0) written = std::min<uint64_t>(body, kPipeBytes);
    region.header().submit_written.value.store(written);
    shared::MessageReader reader(region.Reader(), kMaxMessage);
    std::string message;
    for (int round = 0; round < 64; ++round) {
      absl::StatusOr<bool> got = reader.Next(&message);
      if (!got.ok()) {
        HRX_FUZZ_CHECK(RingOrDecodeReason(got.status()));
        break;
      }
      if (!*got) break;
      HRX_FUZZ_CHECK(message.size() <= kMaxMessage);
      HRX_FUZZ_CHECK(message.size() + 4 <= written);
      hrx::v1::StreamRequest request;
      const absl::Status parsed = hrx::daemon::ParseChecked(message, &request);
      HRX_FUZZ_CHECK(parsed.ok() || RingOrDecodeReason(parsed));
    }
  }
  // Faithful: the input split into messages, framed by the library's writer
  // through a small pipe, arrives intact and in order.
  {
    Region region;
    shared::MessageWriter writer(shared::PipeWriter(
        region.submit(), kPipeBytes, &region.header().submit_written,
        &region.header().submit_read));
    shared::MessageReader reader(region.Reader(), kMaxMessage);
    std::vector<std::string> sent;
    for (size_t at = 0; at < size;) {
      const size_t length = std::min<size_t>(data[at] * 7 + 1, size - at);
      sent.emplace_back(reinterpret_cast<const char*>(data) + at, length);
      at += length;
    }
    size_t next = 0;
    std::vector<std::string> received;
    std::string message;
    for (int steps = 0; received.size() < sent.size() && steps < 100000;
         ++steps) {
      if (writer.idle() && next < sent.size()) {
        HRX_FUZZ_CHECK(writer.Start(sent[next++]).ok());
      } else {
        HRX_FUZZ_CHECK(writer.Continue().ok());
      }
      absl::StatusOr<bool> got = reader.Next(&message);
      HRX_FUZZ_CHECK(got.ok());
      if (*got) received.push_back(message);
    }
    HRX_FUZZ_CHECK(received == sent);
  }
  return 0;
}
