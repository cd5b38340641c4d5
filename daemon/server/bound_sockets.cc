#include "daemon/server/bound_sockets.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/socket_path.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

// Socket files and their directories: the tenant's own processes connect,
// whatever their uid; nobody but hrxd writes in the directory.
constexpr mode_t kDirectoryMode = 0755;
constexpr unsigned kSocketMode = 0666;

absl::Status DirectoryFailed(const std::string& path, const std::string& why) {
  return Refusal(
      Reason::kListenFailed,
      absl::StrFormat("bound tenant directory %s: %s. Fix: check that "
                      "--tenant_socket_dir exists or can be made, belongs to "
                      "hrxd's user and holds nothing else of that name.",
                      path, why));
}

// Makes `path` (mode kDirectoryMode) unless it is already a directory of
// hrxd's user; refuses anything else in its place (a symlink, a file, a
// directory someone else made).
absl::Status EnsureDirectory(const std::string& path) {
  if (mkdir(path.c_str(), kDirectoryMode) == 0) {
    // The umask may have taken bits the containers' users need.
    if (chmod(path.c_str(), kDirectoryMode) != 0) {
      return DirectoryFailed(path, std::strerror(errno));
    }
    return absl::OkStatus();
  }
  if (errno != EEXIST) return DirectoryFailed(path, std::strerror(errno));
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) {
    return DirectoryFailed(path, std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode) || info.st_uid != geteuid()) {
    return DirectoryFailed(
        path, absl::StrFormat("exists and is not a directory of uid %u "
                              "(mode %o, owner %u)",
                              geteuid(), info.st_mode, info.st_uid));
  }
  return absl::OkStatus();
}

}  // namespace

BoundSockets::BoundSockets(BoundSocketOptions options, grpc::Server& server,
                           PeerRegistry& peers, Core& core)
    : options_(std::move(options)),
      server_(server),
      peers_(peers),
      core_(core) {}

BoundSockets::~BoundSockets() { StopAll(); }

std::string BoundSockets::DirectoryOf(const std::string& name) const {
  return absl::StrCat(options_.root, "/", name);
}

absl::StatusOr<BoundTenantSummary> BoundSockets::Create(const std::string& name,
                                                        const Limits& limits,
                                                        bool load_kernels,
                                                        const Labels& labels) {
  // The name becomes a path: checked before anything touches the disk.
  HRX_RETURN_IF_ERROR(CheckBoundTenantName(name));
  const std::string socket_path =
      absl::StrCat(DirectoryOf(name), "/", kBoundSocketName);
  const std::string side_channel = shared::SideChannelPath(socket_path);
  if (side_channel.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return DirectoryFailed(
        DirectoryOf(name),
        absl::StrFormat("its side channel's path would be %u bytes; a Unix "
                        "socket path holds at most %u",
                        side_channel.size(),
                        sizeof(sockaddr_un{}.sun_path) - 1));
  }
  HRX_ASSIGN_OR_RETURN(
      std::shared_ptr<Tenant> tenant,
      core_.admin().AddBoundTenant(name, limits, load_kernels, labels,
                                   socket_path, options_.max_bound_tenants));
  absl::StatusOr<Serving> serving = Serve(name);
  if (!serving.ok()) {
    // Nobody could have connected: the tenant goes as it came.
    core_.RemoveBoundTenant(name, [](absl::StatusOr<uint64_t>) {});
    return serving.status();
  }
  {
    absl::MutexLock lock(&mu_);
    serving_[name] = *std::move(serving);
  }
  for (BoundTenantSummary& bound : core_.admin().ListBoundTenants()) {
    if (bound.tenant.name == name) return std::move(bound);
  }
  return Refusal(Reason::kUnknownTenant,
                 absl::StrFormat("bound tenant \"%s\" was removed while it "
                                 "was being created. Fix: create it again.",
                                 name));
}

absl::StatusOr<BoundSockets::Serving> BoundSockets::Serve(
    const std::string& name) {
  HRX_RETURN_IF_ERROR(EnsureDirectory(options_.root));
  const std::string directory = DirectoryOf(name);
  HRX_RETURN_IF_ERROR(EnsureDirectory(directory));
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

void BoundSockets::Remove(const std::string& name, RemoveDone done) {
  Serving serving;
  {
    absl::MutexLock lock(&mu_);
    auto it = serving_.find(name);
    if (it != serving_.end()) {
      serving = std::move(it->second);
      serving_.erase(it);
    }
  }
  Stop(serving);  // no new connections
  core_.RemoveBoundTenant(name, [this, name, done = std::move(done)](
                                    absl::StatusOr<uint64_t> sessions) {
    if (!sessions.ok()) return done(sessions.status());
    // The tenant resolves no more, so its open connections can do nothing;
    // ending them frees their slots and tells their clients at once.
    Removed removed;
    removed.sessions = *sessions;
    removed.connections = peers_.CloseBound(name);
    const std::string directory = DirectoryOf(name);
    unlink(absl::StrCat(directory, "/", kBoundSocketName).c_str());
    unlink(
        shared::SideChannelPath(absl::StrCat(directory, "/", kBoundSocketName))
            .c_str());
    rmdir(directory.c_str());
    done(removed);
  });
}

void BoundSockets::StopAll() {
  std::map<std::string, Serving> serving;
  {
    absl::MutexLock lock(&mu_);
    serving.swap(serving_);
  }
  for (auto& [name, entry] : serving) {
    Stop(entry);
    unlink(absl::StrCat(DirectoryOf(name), "/", kBoundSocketName).c_str());
  }
}

}  // namespace hrx::daemon
