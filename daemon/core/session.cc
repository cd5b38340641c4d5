#include "daemon/core/session.h"

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::daemon {

std::string Session::Who() const {
  if (identity.remote) {
    return "certificate \"" + identity.certificate_subject + "\"";
  }
  return "uid " + std::to_string(identity.uid) + ", pid " +
         std::to_string(identity.pid);
}

absl::Status RequireWriter(const Session& session, std::string_view what) {
  if (session.tenant->role() != Role::kObserver) return absl::OkStatus();
  return Refusal(Reason::kObserverReadOnly,
                 absl::StrFormat(
                     "%s: tenant \"%s\" (%s) has the observer role, which "
                     "may only inspect. Fix: run the client as a uid of a "
                     "client tenant, or change the tenant's role in the "
                     "config.",
                     std::string(what), session.tenant->name(), session.Who()));
}

}  // namespace hrx::daemon
