#include "daemon/backend/remote/remote_backend.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/backend/remote/remote_queue.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;

}  // namespace

RemoteMemory::RemoteMemory(std::shared_ptr<ExecutorLink> link,
                           uint64_t remote_id, uint64_t size,
                           backend::MemoryKind kind,
                           std::optional<backend::MemfdMapping> mapping)
    : link_(std::move(link)),
      remote_id_(remote_id),
      size_(size),
      kind_(kind),
      id_(backend::NextMemoryId()),
      mapping_(std::move(mapping)) {
  link_->Charge(size_);
}

RemoteMemory::~RemoteMemory() {
  link_->Uncharge(size_);
  link_->Forget(wire::Forget::KIND_MEMORY, remote_id_);
  absl::MutexLock lock(&mu_);
  for (auto& [weak, id] : imports_) {
    if (auto other = weak.lock()) other->Forget(wire::Forget::KIND_MEMORY, id);
  }
}

uint8_t* RemoteMemory::host_address() const {
  return mapping_.has_value() ? mapping_->data() : nullptr;
}

absl::StatusOr<int> RemoteMemory::ExportFd(backend::ExportKind kind) const {
  // Host-reachable pages are exported from hrxd's own mapping (udmabuf needs
  // hrxd's access to /dev/udmabuf, which executors do not have).
  if (mapping_.has_value()) {
    return kind == backend::ExportKind::kShm ? mapping_->ExportShm()
                                             : mapping_->ExportUdmabuf();
  }
  wire::Request request;
  request.mutable_export_memory()->set_memory(remote_id_);
  request.mutable_export_memory()->set_kind(static_cast<uint32_t>(kind));
  HRX_ASSIGN_OR_RETURN(ExecutorLink::Answer answer,
                       link_->Call(std::move(request)));
  if (!answer.fd.valid()) {
    return Refusal(Reason::kExportFailed,
                   "export: the executor sent no descriptor. Fix: report a "
                   "bug.");
  }
  return answer.fd.Release();
}

absl::StatusOr<uint64_t> RemoteMemory::IdOn(
    const std::shared_ptr<ExecutorLink>& link) {
  if (link == link_) return remote_id_;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [weak, id] : imports_) {
      if (weak.lock() == link) return id;
    }
  }
  if (!mapping_.has_value()) {
    return Refusal(
        Reason::kCrossExecutorMemory,
        absl::StrFormat("use a %u-byte device buffer of tenant \"%s\" in "
                        "tenant \"%s\"'s executor: device memory the host "
                        "cannot reach does not cross executors here. Fix: "
                        "share a shared (host-coherent) buffer, or give both "
                        "tenants isolation: ISOLATION_SHARED_EXECUTOR.",
                        size_, link_->tenant(), link->tenant()));
  }
  HRX_ASSIGN_OR_RETURN(int fd, mapping_->ExportShm());
  const uint64_t id = link->NewId();
  wire::Request request;
  request.mutable_import_memory()->set_memory(id);
  request.mutable_import_memory()->set_bytes(size_);
  request.mutable_import_memory()->set_host_coherent(
      kind_ == backend::MemoryKind::kHostCoherent);
  HRX_RETURN_IF_ERROR(
      link->Call(std::move(request), shared::UniqueFd(fd)).status());
  absl::MutexLock lock(&mu_);
  imports_.emplace_back(link, id);
  return id;
}

RemoteKernel::RemoteKernel(std::shared_ptr<ExecutorLink> link,
                           uint64_t remote_id, std::string entry,
                           backend::KernelSignature signature)
    : link_(std::move(link)),
      remote_id_(remote_id),
      entry_(std::move(entry)),
      signature_(std::move(signature)) {}

RemoteKernel::~RemoteKernel() {
  link_->Forget(wire::Forget::KIND_KERNEL, remote_id_);
}

absl::StatusOr<uint64_t> RemoteIdOf(const backend::MemoryRef& memory,
                                    const std::shared_ptr<ExecutorLink>& link) {
  auto* remote = dynamic_cast<RemoteMemory*>(memory.get());
  if (remote == nullptr) {
    return Refusal(Reason::kCrossExecutorMemory,
                   "memory hrxd did not get from an executor. Fix: report a "
                   "bug.");
  }
  return remote->IdOn(link);
}

absl::StatusOr<uint64_t> RemoteIdOf(const backend::KernelRef& kernel,
                                    const ExecutorLink& link) {
  auto* remote = dynamic_cast<const RemoteKernel*>(kernel.get());
  if (remote == nullptr || remote->link() != &link) {
    return Refusal(Reason::kCrossExecutorMemory,
                   "a kernel loaded in another executor. Fix: load the "
                   "kernel in the session that dispatches it.");
  }
  return remote->remote_id();
}

RemoteBackend::RemoteBackend(std::shared_ptr<ExecutorLink> link)
    : link_(std::move(link)) {
  const wire::Hello& hello = link_->hello();
  properties_.backend = hello.backend();
  properties_.name = hello.name();
  properties_.target = hello.target();
  properties_.memory_bytes = hello.memory_bytes();
  properties_.integrated = hello.integrated();
}

absl::StatusOr<backend::MemoryRef> RemoteBackend::Allocate(
    uint64_t bytes, backend::MemoryKind kind, bool zeroed) {
  const uint64_t id = link_->NewId();
  wire::Request request;
  wire::Allocate* allocate = request.mutable_allocate();
  allocate->set_memory(id);
  allocate->set_bytes(bytes);
  allocate->set_host_coherent(kind == backend::MemoryKind::kHostCoherent);
  allocate->set_zeroed(zeroed);
  HRX_ASSIGN_OR_RETURN(ExecutorLink::Answer answer,
                       link_->Call(std::move(request)));
  std::optional<backend::MemfdMapping> mapping;
  if (answer.fd.valid()) {
    auto mapped = backend::MemfdMapping::Adopt(answer.fd.Release(), bytes);
    if (!mapped.ok()) {
      // The executor holds the memory: it lets go of it, or it would stay
      // charged there until the executor restarts.
      link_->Forget(wire::Forget::KIND_MEMORY, id);
      return mapped.status();
    }
    mapping.emplace(*std::move(mapped));
  }
  return backend::MemoryRef(std::make_shared<RemoteMemory>(
      link_, id, bytes, kind, std::move(mapping)));
}

absl::StatusOr<std::unique_ptr<backend::Queue>> RemoteBackend::CreateQueue() {
  const uint64_t id = link_->NewId();
  wire::Request request;
  request.mutable_create_queue()->set_queue(id);
  HRX_RETURN_IF_ERROR(link_->Call(std::move(request)).status());
  return std::unique_ptr<backend::Queue>(
      std::make_unique<RemoteQueue>(link_, id));
}

absl::StatusOr<backend::KernelRef> RemoteBackend::LoadKernel(
    std::string_view code, const std::string& entry) {
  const uint64_t id = link_->NewId();
  wire::Request request;
  wire::LoadKernel* load = request.mutable_load_kernel();
  load->set_kernel(id);
  load->set_code(std::string(code));
  load->set_entry(entry);
  HRX_ASSIGN_OR_RETURN(ExecutorLink::Answer answer,
                       link_->Call(std::move(request)));
  backend::KernelSignature signature;
  for (const wire::KernelArg& arg : answer.reply.args()) {
    signature.args.push_back(
        {arg.buffer() ? backend::ArgKind::kBuffer : backend::ArgKind::kScalar,
         arg.size()});
  }
  for (int d = 0; d < answer.reply.workgroup_size_size() && d < 3; ++d) {
    signature.workgroup_size[d] = answer.reply.workgroup_size(d);
  }
  return backend::KernelRef(
      std::make_shared<RemoteKernel>(link_, id, entry, std::move(signature)));
}

std::vector<backend::ExportKind> RemoteBackend::export_kinds() const {
  std::vector<backend::ExportKind> kinds;
  for (uint32_t kind : link_->hello().export_kinds()) {
    kinds.push_back(static_cast<backend::ExportKind>(kind));
  }
  // Host-reachable memory is exported from hrxd's mapping, which can make
  // dma-bufs where hrxd can (see RemoteMemory::ExportFd).
  if (backend::UdmabufAvailable() &&
      std::find(kinds.begin(), kinds.end(), backend::ExportKind::kDmaBuf) ==
          kinds.end()) {
    kinds.push_back(backend::ExportKind::kDmaBuf);
  }
  return kinds;
}

}  // namespace hrx::backend::remote
