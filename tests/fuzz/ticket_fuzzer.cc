// Fuzzes the side channel's ticket exchange at its core: Sharing::Redeem
// with the bytes a client sends, against a core that holds one live export.
// Input: the ticket bytes; a first byte of 0xff instead means "the live
// ticket, with the rest of the input XORed over it".
// Checks: only the exact live ticket, from the exporting process, yields a
// descriptor, and only once; every other ticket is refused with a reason.
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/core/core_harness.h"
#include "shared/refusal.h"
#include "tests/fuzz/fuzz_target.h"

namespace hrx::daemon::testing {
namespace {

struct Exporter {
  CoreHarness harness;
  std::string ticket;
  uint64_t buffer = 0;

  // A fresh export of a fresh shared buffer (the previous one freed, so a
  // long run holds one): its single-use ticket.
  void Export() {
    if (buffer != 0) {
      HRX_FUZZ_CHECK(
          harness.core().buffers().Free(harness.session(), buffer).ok());
    }
    auto allocated = harness.core().buffers().Allocate(harness.session(), 4096,
                                                       AllocationKind::kShared);
    HRX_FUZZ_CHECK(allocated.ok());
    buffer = allocated->handle;
    auto exported = harness.core().sharing().Export(harness.session(), buffer,
                                                    backend::ExportKind::kShm);
    HRX_FUZZ_CHECK(exported.ok());
    ticket = exported->ticket;
  }
};

Exporter& State() {
  static Exporter* exporter = [] {
    auto* made = new Exporter;
    made->Export();
    return made;
  }();
  return *exporter;
}

}  // namespace
}  // namespace hrx::daemon::testing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hrx::daemon::testing;
  Exporter& state = State();
  std::string ticket(reinterpret_cast<const char*>(data), size);
  if (size > 0 && data[0] == 0xff) {
    ticket = state.ticket;
    for (size_t i = 1; i < size && i - 1 < ticket.size(); ++i) {
      ticket[i - 1] = static_cast<char>(ticket[i - 1] ^ data[i]);
    }
  }
  // Redeemed by the exporting process, or (odd sizes) by another one,
  // which is refused and spends the ticket all the same.
  const bool as_owner = size % 2 == 0;
  hrx::daemon::PeerIdentity peer = Me();
  if (!as_owner) peer.pid += 1;
  const bool live = ticket == state.ticket;
  auto redeemed = state.harness.core().sharing().Redeem(ticket, peer);
  HRX_FUZZ_CHECK(redeemed.ok() == (live && as_owner));
  if (!redeemed.ok()) {
    HRX_FUZZ_CHECK(hrx::ReasonOf(redeemed.status()).has_value());
  }
  if (live) {
    // Single use: the same ticket again is refused.
    auto twice = state.harness.core().sharing().Redeem(ticket, Me());
    HRX_FUZZ_CHECK(!twice.ok() && hrx::ReasonOf(twice.status()).has_value());
    state.Export();  // a fresh live ticket for the next input
  }
  return 0;
}
