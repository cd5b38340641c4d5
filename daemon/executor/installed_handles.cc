#include "daemon/executor/installed_handles.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::executor {

void InstalledHandles::Install(const shared::WireHandle& handle) {
  absl::MutexLock lock(&mu_);
  sessions_[handle.session][handle.object] = handle;
}

void InstalledHandles::Revoke(uint64_t session, uint64_t object) {
  absl::MutexLock lock(&mu_);
  ++revocations_;
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  it->second.erase(object);
  if (it->second.empty()) sessions_.erase(it);
}

void InstalledHandles::RevokeSession(uint64_t session) {
  absl::MutexLock lock(&mu_);
  ++revocations_;
  sessions_.erase(session);
}

size_t InstalledHandles::size() const {
  absl::MutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [session, handles] : sessions_) count += handles.size();
  return count;
}

shared::WireHandle InstalledHandles::Seal(uint64_t session,
                                          uint64_t object) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return {};
  auto found = it->second.find(object);
  return found == it->second.end() ? shared::WireHandle{} : found->second;
}

absl::StatusOr<uint64_t> InstalledHandles::Open(
    const shared::WireHandle& handle, uint64_t caller_session,
    shared::HandleKind kind, std::string_view what) const {
  if (handle.session == caller_session &&
      shared::Handle::Decode(handle.object).kind == kind) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(caller_session);
    if (it != sessions_.end()) {
      auto found = it->second.find(handle.object);
      // All four fields: a handle altered in any one is not this one.
      if (found != it->second.end() && found->second == handle) {
        return handle.object;
      }
    }
  }
  // Not one installed for this use: hrxd says why, or vouches for it.
  uint64_t revocations_before;
  {
    absl::MutexLock lock(&mu_);
    revocations_before = revocations_;
  }
  absl::StatusOr<uint64_t> answer = ask_(handle, caller_session, kind, what);
  if (!answer.ok()) return answer.status();
  if (*answer != handle.object || handle.session != caller_session) {
    return Refusal(
        Reason::kStreamProtocol,
        absl::StrFormat("%s: hrxd vouched for object %016x of session %016x "
                        "for a handle naming object %016x of session %016x. "
                        "Fix: report a bug.",
                        what, *answer, caller_session, handle.object,
                        handle.session));
  }
  absl::MutexLock lock(&mu_);
  // A revocation while hrxd was asked may be of this very handle (its
  // object freed, its session ended since hrxd answered): the answer
  // stands for this open, but is not kept.
  if (revocations_ == revocations_before) {
    sessions_[caller_session][handle.object] = handle;
  }
  return handle.object;
}

}  // namespace hrx::executor
