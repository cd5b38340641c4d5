#include "daemon/core/session_table.h"

#include "absl/strings/str_format.h"
#include "daemon/core/types.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

absl::Status CheckClientName(const std::string& client_name) {
  if (client_name.size() > kMaxClientNameBytes) {
    return Refusal(
        Reason::kClientNameTooLong,
        absl::StrFormat("open session: client name is %u bytes, the limit is "
                        "%u. Fix: send a shorter client_name.",
                        client_name.size(), kMaxClientNameBytes));
  }
  // Names reach operators' terminals (hrxctl sessions): no control bytes.
  for (size_t i = 0; i < client_name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(client_name[i]);
    if (c < 0x20 || c == 0x7f) {
      return Refusal(
          Reason::kBadClientName,
          absl::StrFormat("open session: byte %u of the client name is "
                          "control character 0x%02x. Fix: send a "
                          "client_name of printable characters.",
                          i, c));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DescribeCaller(const PeerIdentity& caller) {
  return caller.remote
             ? absl::StrFormat("certificate \"%s\"", caller.certificate_subject)
         : caller.bound_tenant.empty()
             ? absl::StrFormat("uid %u, pid %u", caller.uid, caller.pid)
             : absl::StrFormat(
                   "uid %u, pid %u through bound tenant \"%s\"'s socket",
                   caller.uid, caller.pid, caller.bound_tenant);
}

absl::StatusOr<uint64_t> SessionTable::Open(const std::string& client_name,
                                            const PeerIdentity& caller) {
  std::shared_ptr<Tenant> tenant = tenants_->Resolve(caller);
  if (tenant == nullptr && !caller.bound_tenant.empty()) {
    return BoundTenantRemoved(caller.bound_tenant, "open session");
  }
  if (tenant == nullptr) {
    return Refusal(
        Reason::kUnknownCertificate,
        absl::StrFormat("open session: no tenant lists certificate subject "
                        "\"%s\". Fix: add it to a tenant's "
                        "certificate_subjects.",
                        caller.certificate_subject));
  }
  HRX_RETURN_IF_ERROR(CheckClientName(client_name));
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       tenant->Reserve(Resource::kSessions, 1, "open session",
                                       DescribeCaller(caller)));
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= kMaxSessions) {
    return Refusal(
        Reason::kTooManySessions,
        absl::StrFormat("open session: %u sessions are open, the limit is "
                        "%u. Fix: close idle sessions (hrxctl status shows "
                        "the count).",
                        sessions_.size(), kMaxSessions));
  }
  auto session =
      std::make_shared<Session>(client_name, caller, tenant, std::move(charge));
  session->last_call_ns.store(absl::ToUnixNanos(clock_.Now()));
  return sessions_.Insert(std::move(session));
}

absl::Status SessionTable::InsertAt(uint64_t id,
                                    std::shared_ptr<Session> session) {
  absl::MutexLock lock(&mu_);
  return sessions_.InsertAt(id, std::move(session));
}

absl::Status SessionTable::VerifyCaller(uint64_t session,
                                        const PeerIdentity& caller) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, Find(session));
  const PeerIdentity& opener = owner->identity;
  // A local session belongs to its connection (which carries the uid and
  // pid read when it was accepted); a remote one to its certificate.
  const bool mine =
      opener.remote
          ? caller.remote &&
                opener.certificate_subject == caller.certificate_subject
          : !caller.remote && opener.connection == caller.connection &&
                opener.uid == caller.uid && opener.pid == caller.pid;
  if (mine) {
    owner->last_call_ns.store(absl::ToUnixNanos(clock_.Now()));
    return absl::OkStatus();
  }
  return Refusal(
      Reason::kSessionNotYours,
      absl::StrFormat("the session was opened by %s on another connection; "
                      "this call comes from %s. Fix: open a session on the "
                      "calling connection; session handles are not "
                      "transferable.",
                      owner->Who(), DescribeCaller(caller)));
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Find(
    uint64_t session) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<Session>*> found =
      sessions_.Find(session, "session");
  if (!found.ok()) {
    auto buried = tombstones_.find(session);
    if (buried != tombstones_.end()) return buried->second;
    return found.status();
  }
  return **found;
}

void SessionTable::Bury(uint64_t session, absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (!tombstones_.emplace(session, std::move(why)).second) return;
  tombstone_order_.push_back(session);
  if (tombstone_order_.size() > kMaxSessionTombstones) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Remove(
    uint64_t session, std::string_view what) {
  absl::MutexLock lock(&mu_);
  return sessions_.Remove(session, what);
}

std::vector<SessionTable::Entry> SessionTable::Select(
    const std::function<bool(uint64_t, const Session&)>& keep) const {
  std::vector<Entry> selected;
  absl::MutexLock lock(&mu_);
  sessions_.ForEachHandle(
      [&](uint64_t handle, const std::shared_ptr<Session>& session) {
        if (!keep || keep(handle, *session)) {
          selected.emplace_back(handle, session);
        }
      });
  return selected;
}

size_t SessionTable::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace hrx::daemon
