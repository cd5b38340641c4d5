// Test helper: the kubelet, as far as a device plugin sees it. It serves
// the Registration service on its device-plugins socket (recording each
// registration) and the pod resources API on its own socket (answering with
// whatever pods the test sets), over real gRPC on real Unix sockets, and
// can restart the way the kubelet does: its socket made anew and every
// plugin socket in the directory deleted.
#ifndef HRX_TESTS_KUBERNETES_FAKE_KUBELET_H_
#define HRX_TESTS_KUBERNETES_FAKE_KUBELET_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"
#include "k8s/podresources/v1/api.grpc.pb.h"

namespace hrx::testing {

class FakeKubelet {
 public:
  // Serves on `directory`/kubelet.sock and `pod_resources_socket`.
  FakeKubelet(std::string directory, std::string pod_resources_socket);
  ~FakeKubelet();

  const std::string& directory() const { return directory_; }
  std::string registration_socket() const {
    return directory_ + "/kubelet.sock";
  }

  // The `n`th registration (from 1), waiting up to `limit` for it.
  std::optional<v1beta1::RegisterRequest> WaitForRegistration(
      size_t n, absl::Duration limit);
  size_t registrations();

  // What List answers from now on; pods given as (namespace/name,
  // container, device IDs of `resource`).
  struct Pod {
    std::string namespace_name;
    std::string container;
    std::string resource;
    std::vector<std::string> device_ids;
  };
  void SetPods(const std::vector<Pod>& pods);
  size_t pod_resource_calls();

  // A kubelet restart: registration stops, kubelet.sock and every plugin
  // socket in the directory are deleted, then registration serves again on
  // a new socket. The pod resources API is left as it is.
  void Restart();

 private:
  class Registration;
  class PodResources;
  void ServeRegistration();

  const std::string directory_;
  std::unique_ptr<Registration> registration_;
  std::unique_ptr<PodResources> pod_resources_;
  std::unique_ptr<grpc::Server> registration_server_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
};

}  // namespace hrx::testing

#endif  // HRX_TESTS_KUBERNETES_FAKE_KUBELET_H_
