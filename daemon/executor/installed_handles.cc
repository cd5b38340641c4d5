#include "daemon/executor/installed_handles.h"

#include <utility>

namespace hrx::executor {

void InstalledHandles::Install(const shared::WireHandle& handle) {
  absl::MutexLock lock(&mu_);
  sessions_[handle.session][handle.object] = handle;
}

void InstalledHandles::Revoke(uint64_t session, uint64_t object) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  it->second.erase(object);
  if (it->second.empty()) sessions_.erase(it);
}

void InstalledHandles::RevokeSession(uint64_t session) {
  absl::MutexLock lock(&mu_);
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
  absl::StatusOr<uint64_t> answer = ask_(handle, caller_session, kind, what);
  if (!answer.ok()) return answer.status();
  absl::MutexLock lock(&mu_);
  sessions_[caller_session][*answer] = handle;
  return *answer;
}

}  // namespace hrx::executor
