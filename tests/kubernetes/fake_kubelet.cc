#include "tests/kubernetes/fake_kubelet.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/server_builder.h"

namespace hrx::testing {

class FakeKubelet::Registration final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext* context,
                        const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* response) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    return grpc::Status::OK;
  }
  std::optional<v1beta1::RegisterRequest> Wait(size_t n, absl::Duration limit) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return requests_.size() >= n;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), limit)) {
      return std::nullopt;
    }
    return requests_[n - 1];
  }
  size_t count() {
    absl::MutexLock lock(&mu_);
    return requests_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<v1beta1::RegisterRequest> requests_ ABSL_GUARDED_BY(mu_);
};

class FakeKubelet::PodResources final
    : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* context,
                    const ::v1::ListPodResourcesRequest* request,
                    ::v1::ListPodResourcesResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    *response = pods_;
    return grpc::Status::OK;
  }
  void Set(::v1::ListPodResourcesResponse pods) {
    absl::MutexLock lock(&mu_);
    pods_ = std::move(pods);
  }
  size_t calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  ::v1::ListPodResourcesResponse pods_ ABSL_GUARDED_BY(mu_);
  size_t calls_ ABSL_GUARDED_BY(mu_) = 0;
};

FakeKubelet::FakeKubelet(std::string directory,
                         std::string pod_resources_socket)
    : directory_(std::move(directory)),
      registration_(std::make_unique<Registration>()),
      pod_resources_(std::make_unique<PodResources>()) {
  ServeRegistration();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", pod_resources_socket),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(pod_resources_.get());
  pod_resources_server_ = builder.BuildAndStart();
}

FakeKubelet::~FakeKubelet() {
  if (registration_server_) registration_server_->Shutdown();
  if (pod_resources_server_) pod_resources_server_->Shutdown();
}

void FakeKubelet::ServeRegistration() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", registration_socket()),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(registration_.get());
  registration_server_ = builder.BuildAndStart();
}

std::optional<v1beta1::RegisterRequest> FakeKubelet::WaitForRegistration(
    size_t n, absl::Duration limit) {
  return registration_->Wait(n, limit);
}

size_t FakeKubelet::registrations() { return registration_->count(); }

void FakeKubelet::SetPods(const std::vector<Pod>& pods) {
  ::v1::ListPodResourcesResponse response;
  for (const Pod& pod : pods) {
    std::vector<std::string> parts =
        absl::StrSplit(pod.namespace_name, absl::MaxSplits('/', 1));
    ::v1::PodResources* resources = response.add_pod_resources();
    resources->set_namespace_(parts[0]);
    resources->set_name(parts.size() > 1 ? parts[1] : "");
    ::v1::ContainerResources* container = resources->add_containers();
    container->set_name(pod.container);
    // As the kubelet answers: one entry per device (it groups them by NUMA
    // node, and devices without topology each get their own).
    for (const std::string& id : pod.device_ids) {
      ::v1::ContainerDevices* devices = container->add_devices();
      devices->set_resource_name(pod.resource);
      devices->add_device_ids(id);
    }
  }
  pod_resources_->Set(std::move(response));
}

size_t FakeKubelet::pod_resource_calls() { return pod_resources_->calls(); }

void FakeKubelet::Restart() {
  registration_server_->Shutdown();
  registration_server_.reset();
  // The kubelet's device manager deletes every socket in its directory when
  // it starts (its own included): plugins learn of the restart this way.
  if (DIR* listing = opendir(directory_.c_str())) {
    while (dirent* entry = readdir(listing)) {
      const std::string path = absl::StrCat(directory_, "/", entry->d_name);
      struct stat info {};
      if (lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) {
        unlink(path.c_str());
      }
    }
    closedir(listing);
  }
  ServeRegistration();
}

}  // namespace hrx::testing
