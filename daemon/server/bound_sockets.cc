#include "daemon/server/bound_sockets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/own_directory.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

// Only hrxd's user goes through the tenant socket directory: a tenant's
// socket is reached through a mount of its own directory.
constexpr mode_t kRootMode = 0700;
// A tenant's directory and sockets: whoever has the directory connects,
// whatever its uid; nobody but hrxd writes there.
constexpr mode_t kDirectoryMode = 0755;
constexpr unsigned kSocketMode = 0666;

// How the tenant socket directory and each tenant's directory are made
// and checked (own_directory.h): hrxd sets modes only on what it creates.
absl::Status EnsureDirectory(const std::string& path, mode_t mode) {
  const DirectoryRefusals refusals{
      Reason::kListenFailed, Reason::kListenFailed, Reason::kListenFailed,
      "pass --tenant_socket_dir naming a directory of hrxd's own"};
  return PrepareOwnDirectory(path, mode, ExistingMode::kNoLooser, refusals);
}

}  // namespace

BoundSockets::BoundSockets(BoundSocketOptions options, grpc::Server& server,
                           PeerRegistry& peers, Core& core)
    : options_(std::move(options)),
      server_(server),
      peers_(peers),
      core_(core) {}

BoundSockets::~BoundSockets() { StopAll(); }

size_t MaxBoundTenantNameBytes(const std::string& root) {
  // ROOT/NAME/hrxd.sock.fds, and the terminating NUL.
  const size_t fixed =
      shared::SideChannelPath(absl::StrCat(root, "//", kBoundSocketName))
          .size();
  const size_t room = sizeof(sockaddr_un{}.sun_path) - 1;
  if (fixed >= room) return 0;
  return std::min<size_t>(room - fixed, kMaxBoundTenantNameBytes);
}

size_t BoundSockets::MaxNameBytes() const {
  return MaxBoundTenantNameBytes(options_.root);
}

std::string BoundSockets::DirectoryOf(const std::string& name) const {
  return absl::StrCat(options_.root, "/", name);
}

absl::Status BoundSockets::Busy(const std::string& name, State state) const {
  return Refusal(
      Reason::kTenantBusy,
      absl::StrFormat("bound tenant \"%s\" is being %s. Fix: retry "
                      "once that has finished.",
                      name, state == State::kRemoving ? "removed" : "created"));
}

absl::StatusOr<BoundTenantSummary> BoundSockets::Create(const std::string& name,
                                                        const Limits& limits,
                                                        bool load_kernels,
                                                        const Labels& labels) {
  // The name becomes a path: checked before anything touches the disk.
  HRX_RETURN_IF_ERROR(CheckBoundTenantName(name));
  const std::string socket_path =
      absl::StrCat(DirectoryOf(name), "/", kBoundSocketName);
  const size_t longest = MaxNameBytes();
  if (name.size() > longest) {
    return Refusal(
        Reason::kBadTenantName,
        absl::StrFormat(
            "bound tenant name %s is %u bytes; under --tenant_socket_dir=%s "
            "(%u bytes) a name may be at most %u, so that its side channel "
            "%s fits the %u bytes of a Unix socket path. Fix: use a name of "
            "at most %u bytes, or a shorter --tenant_socket_dir.",
            name, name.size(), options_.root, options_.root.size(), longest,
            shared::SideChannelPath(socket_path),
            sizeof(sockaddr_un{}.sun_path) - 1, longest));
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = serving_.find(name);
    if (it != serving_.end() && it->second.state != State::kServing) {
      return Busy(name, it->second.state);
    }
    // A serving name is refused by the core below, as any taken name is.
    if (it == serving_.end()) serving_[name].state = State::kCreating;
  }
  auto forget = [this, &name] {
    absl::MutexLock lock(&mu_);
    auto it = serving_.find(name);
    if (it != serving_.end() && it->second.state == State::kCreating) {
      serving_.erase(it);
    }
  };
  absl::StatusOr<std::shared_ptr<Tenant>> tenant =
      core_.admin().AddBoundTenant(name, limits, load_kernels, labels,
                                   socket_path, options_.max_bound_tenants);
  if (!tenant.ok()) {
    forget();
    return tenant.status();
  }
  absl::StatusOr<Serving> serving = Serve(name);
  if (!serving.ok()) {
    // Nobody could have connected: the tenant goes as it came.
    core_.RemoveBoundTenant(name, [](absl::StatusOr<uint64_t>) {});
    forget();
    return serving.status();
  }
  serving->state = State::kServing;
  {
    absl::MutexLock lock(&mu_);
    serving_[name] = *std::move(serving);
  }
  // Nobody can remove it meanwhile but through Remove, which sees it now.
  for (BoundTenantSummary& bound : core_.admin().ListBoundTenants()) {
    if (bound.tenant.name == name) return std::move(bound);
  }
  return Refusal(Reason::kUnknownTenant,
                 absl::StrFormat("bound tenant \"%s\" was removed as it was "
                                 "created. Fix: create it again.",
                                 name));
}

absl::StatusOr<BoundSockets::Serving> BoundSockets::Serve(
    const std::string& name) {
  HRX_RETURN_IF_ERROR(EnsureDirectory(options_.root, kRootMode));
  const std::string directory = DirectoryOf(name);
  HRX_RETURN_IF_ERROR(EnsureDirectory(directory, kDirectoryMode));
  const std::string socket_path =
      absl::StrCat(directory, "/", kBoundSocketName);
  // A socket left by a previous run of hrxd (the directory stays for the
  // containers' mounts); hrxd holds its main socket's lock, so it is stale.
  unlink(socket_path.c_str());
  Serving serving;
  HRX_ASSIGN_OR_RETURN(serving.side_channel,
                       FdChannel::Start(shared::SideChannelPath(socket_path),
                                        kSocketMode, core_));
  HRX_ASSIGN_OR_RETURN(serving.listener,
                       LocalListener::Start(socket_path, kSocketMode, server_,
                                            peers_, core_, name));
  return serving;
}

void BoundSockets::Stop(Serving& serving) {
  if (serving.listener != nullptr) serving.listener->Stop();
  serving.side_channel.reset();  // removes its socket
}

void BoundSockets::RemoveSockets(const std::string& name,
                                 bool and_directory) const {
  const int root = open(options_.root.c_str(),
                        O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_RDONLY);
  if (root < 0) return;
  const int directory = openat(root, name.c_str(),
                               O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_RDONLY);
  if (directory >= 0) {
    unlinkat(directory, kBoundSocketName, 0);
    unlinkat(directory, shared::SideChannelPath(kBoundSocketName).c_str(), 0);
    close(directory);
    if (and_directory) unlinkat(root, name.c_str(), AT_REMOVEDIR);
  }
  close(root);
}

void BoundSockets::Remove(const std::string& name, RemoveDone done) {
  Serving serving;
  {
    absl::MutexLock lock(&mu_);
    auto it = serving_.find(name);
    if (it != serving_.end() && it->second.state != State::kServing) {
      return done(Busy(name, it->second.state));
    }
    if (it != serving_.end()) {
      serving.listener = std::move(it->second.listener);
      serving.side_channel = std::move(it->second.side_channel);
      // The name stays taken until everything below is done.
      it->second.state = State::kRemoving;
    }
  }
  Stop(serving);  // no new connections
  core_.RemoveBoundTenant(name, [this, name, done = std::move(done)](
                                    absl::StatusOr<uint64_t> sessions) {
    absl::StatusOr<Removed> removed =
        sessions.ok() ? absl::StatusOr<Removed>(Removed{*sessions, 0})
                      : absl::StatusOr<Removed>(sessions.status());
    if (sessions.ok()) {
      // The tenant resolves no more, so its open connections can do
      // nothing; ending them frees their slots and tells their clients.
      removed->connections = peers_.CloseBound(name);
      RemoveSockets(name, /*and_directory=*/true);
    }
    {
      absl::MutexLock lock(&mu_);
      auto it = serving_.find(name);
      if (it != serving_.end() && it->second.state == State::kRemoving) {
        serving_.erase(it);
      }
    }
    done(removed);
  });
}

void BoundSockets::StopAll() {
  std::map<std::string, Serving> serving;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, entry] : serving_) {
      serving[name].listener = std::move(entry.listener);
      serving[name].side_channel = std::move(entry.side_channel);
    }
  }
  for (auto& [name, entry] : serving) {
    Stop(entry);
    // The directory stays: containers hold mounts of it.
    RemoveSockets(name, /*and_directory=*/false);
  }
}

}  // namespace hrx::daemon
