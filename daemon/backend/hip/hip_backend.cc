#include "daemon/backend/hip/hip_backend.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/backend/hip/hip_kernel.h"
#include "daemon/backend/hip/hip_memory.h"
#include "daemon/backend/hip/hip_placement.h"
#include "daemon/backend/hip/hip_platform.h"
#include "daemon/backend/hip/hip_queue.h"
#include "daemon/backend/hip/hip_status.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

// Whether the driver turns device memory into a dma-buf: asked once, of a
// real allocation, since support depends on the driver and kernel module.
bool ProbeDriverDmaBuf(int device, std::shared_ptr<HipReclaimer> reclaimer) {
  constexpr uint64_t kProbeBytes = 2 << 20;
  auto probe = HipMemory::Create(
      device, kProbeBytes, MemoryKind::kDevice, HipPlacement::kDeviceAllocation,
      false, std::make_shared<MemoryAccounting>(kProbeBytes, "probe"),
      std::move(reclaimer));
  if (!probe.ok()) return false;
  auto fd = (*probe)->ExportFd(ExportKind::kDmaBuf);
  if (!fd.ok()) return false;
  close(*fd);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HipBackend>> HipBackend::Open(
    const HipBackendOptions& options) {
  int count = 0;
  const hipError_t counted = hipGetDeviceCount(&count);
  if (counted != hipSuccess || count == 0) {
    return Refusal(
        Reason::kHipUnavailable,
        absl::StrCat(
            "backend hip (", hip_platform::Name(),
            "): no usable GPU: hipGetDeviceCount says ",
            counted != hipSuccess ? hipGetErrorName(counted) : "0 devices",
            " (",
            counted != hipSuccess ? hipGetErrorString(counted) : "none found",
            "). Fix: install the GPU driver and give the daemon its device "
            "nodes, or run with --backend=cpu."));
  }
  if (options.device < 0 || options.device >= count) {
    return Refusal(
        Reason::kBadDevice,
        absl::StrFormat(
            "backend hip: device %d does not exist; this machine has "
            "%d (0 to %d). Fix: choose an existing device index.",
            options.device, count, count - 1));
  }
  HRX_RETURN_IF_ERROR(BindDevice(options.device));
  hipDeviceProp_t device_properties{};
  HRX_HIP_RETURN_IF_ERROR(
      hipGetDeviceProperties(&device_properties, options.device),
      "open the GPU", "hipGetDeviceProperties",
      "check the GPU driver (hrxd --backend=cpu runs without it)");
  DeviceProperties properties;
  properties.backend = "hip";
  properties.name = absl::StrCat(device_properties.name, " (HIP on ",
                                 hip_platform::Name(), ")");
  properties.target = hip_platform::TargetName(device_properties);
  properties.memory_bytes = device_properties.totalGlobalMem;
  properties.integrated = device_properties.integrated != 0;
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<HipReclaimer> reclaimer,
                       HipReclaimer::Create(options.device));
  // The stream-ordered allocator where it works and its memory exports as
  // dma-buf where plain allocations do; otherwise hipMalloc.
  bool dmabuf = ProbeDriverDmaBuf(options.device, reclaimer);
  if (!dmabuf) {
    reclaimer->set_stream_ordered(false);
    dmabuf = ProbeDriverDmaBuf(options.device, reclaimer);
    if (!dmabuf) reclaimer->set_stream_ordered(true);
  }
  return std::unique_ptr<HipBackend>(new HipBackend(
      options.device, std::move(properties), dmabuf, std::move(reclaimer)));
}

HipBackend::HipBackend(int device, DeviceProperties properties,
                       bool driver_dmabuf,
                       std::shared_ptr<HipReclaimer> reclaimer)
    : device_(device),
      properties_(std::move(properties)),
      driver_dmabuf_(driver_dmabuf),
      accounting_(std::make_shared<MemoryAccounting>(
          properties_.memory_bytes,
          "use a GPU with more memory (the limit is the device's total)")),
      reclaimer_(std::move(reclaimer)) {}

absl::StatusOr<MemoryRef> HipBackend::Allocate(uint64_t bytes, MemoryKind kind,
                                               bool zeroed) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<HipMemory> memory,
                       HipMemory::Create(device_, bytes, kind,
                                         PlaceAllocation(kind, properties_),
                                         zeroed, accounting_, reclaimer_));
  return MemoryRef(std::move(memory));
}

absl::StatusOr<std::unique_ptr<Queue>> HipBackend::CreateQueue() {
  HRX_ASSIGN_OR_RETURN(std::unique_ptr<HipQueue> queue,
                       HipQueue::Create(device_, health_));
  return std::unique_ptr<Queue>(std::move(queue));
}

absl::StatusOr<KernelRef> HipBackend::LoadKernel(std::string_view code,
                                                 const std::string& entry) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<HipKernel> kernel,
                       HipKernel::Load(device_, code, entry, reclaimer_));
  return KernelRef(std::move(kernel));
}

uint64_t HipBackend::bytes_in_use() const {
  return accounting_->in_use_bytes();
}

absl::StatusOr<MemoryRef> HipBackend::ImportShm(int fd, uint64_t bytes,
                                                MemoryKind kind) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<HipMemory> memory,
                       HipMemory::Adopt(device_, fd, bytes, kind,
                                        PlaceImport(kind), reclaimer_));
  return MemoryRef(std::move(memory));
}

std::vector<ExportKind> HipBackend::export_kinds() const {
  std::vector<ExportKind> kinds = {ExportKind::kShm};
  // An integrated device's buffers are host pages (hip_placement.h): their
  // dma-bufs come from udmabuf, whatever the driver's export can do.
  const bool driver_exports = driver_dmabuf_ && !properties_.integrated;
  if (driver_exports || UdmabufAvailable()) {
    kinds.push_back(ExportKind::kDmaBuf);
  }
  return kinds;
}

}  // namespace hrx::backend
