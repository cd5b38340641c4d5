// Fuzzes handles as text (the session metadata every call carries) and as
// wire values: parsing, and opening by the handle authority.
// Checks: a parsed handle formats back to text that parses to the same
// handle; no handle made from outside input opens (forging needs the run's
// key); a handle the authority sealed opens for its session and kind only.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "daemon/core/handle_authority.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using hrx::shared::HandleKind;
using hrx::shared::WireHandle;

const hrx::daemon::HandleAuthority& Authority() {
  static const auto* authority = new hrx::daemon::HandleAuthority(
      0xfeed, hrx::shared::SipKey{9, 8, 7, 6, 5, 4, 3, 2});
  return *authority;
}

constexpr uint64_t kSession =
    hrx::shared::Handle{HandleKind::kSession, 5, 1}.Encode();

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  WireHandle parsed{};
  if (hrx::shared::ParseWireHandle(text, &parsed)) {
    WireHandle again{};
    HRX_FUZZ_CHECK(hrx::shared::ParseWireHandle(
        hrx::shared::FormatWireHandle(parsed), &again));
    HRX_FUZZ_CHECK(again.instance == parsed.instance &&
                   again.session == parsed.session &&
                   again.object == parsed.object && again.tag == parsed.tag);
  }
  if (size < sizeof(WireHandle)) return 0;
  WireHandle raw{};
  std::memcpy(&raw, data, sizeof(raw));
  const WireHandle sealed = Authority().Seal(kSession, raw.object);
  const bool is_sealed = raw.instance == sealed.instance &&
                         raw.session == sealed.session &&
                         raw.object == sealed.object && raw.tag == sealed.tag;
  for (HandleKind kind : {HandleKind::kBuffer, HandleKind::kStream,
                          HandleKind::kKernel, HandleKind::kGraphExec}) {
    auto opened = Authority().Open(raw, kSession, kind, "fuzz");
    if (!opened.ok()) {
      HRX_FUZZ_CHECK(hrx::ReasonOf(opened.status()).has_value());
    }
    // Only the authority's own seal opens.
    HRX_FUZZ_CHECK(!opened.ok() || is_sealed);
  }
  // The seal of the input's object opens as exactly its own kind.
  const hrx::shared::Handle object = hrx::shared::Handle::Decode(raw.object);
  auto own = Authority().Open(sealed, kSession, object.kind, "fuzz");
  if (own.ok()) HRX_FUZZ_CHECK(*own == raw.object);
  return 0;
}
