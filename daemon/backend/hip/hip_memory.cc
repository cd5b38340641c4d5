#include "daemon/backend/hip/hip_memory.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "daemon/backend/hip/hip_status.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

constexpr char kAllocateFix[] =
    "free buffers or allocate less; other processes on this GPU hold memory "
    "too";

// Stream-ordered where the reclaimer says so (see hip_reclaimer.h); the
// allocation stream is waited for, so every queue may use the memory at once.
absl::StatusOr<uint8_t*> AllocateDevice(uint64_t bytes, bool zeroed,
                                        const HipReclaimer& reclaimer) {
  void* address = nullptr;
  const hipStream_t stream = reclaimer.stream();
  if (reclaimer.stream_ordered()) {
    HRX_HIP_RETURN_IF_ERROR(hipMallocAsync(&address, bytes, stream),
                            "allocate device memory", "hipMallocAsync",
                            kAllocateFix);
  } else {
    HRX_HIP_RETURN_IF_ERROR(hipMalloc(&address, bytes),
                            "allocate device memory", "hipMalloc",
                            kAllocateFix);
  }
  hipError_t error = hipSuccess;
  if (zeroed) error = hipMemsetD8Async(address, 0, bytes, stream);
  if (error == hipSuccess) error = hipStreamSynchronize(stream);
  if (error != hipSuccess) {
    (void)(reclaimer.stream_ordered() ? hipFreeAsync(address, stream)
                                      : hipFree(address));
    return HipStatus(error, "prepare device memory", "hipStreamSynchronize",
                     "check the GPU's health (hrxctl status)");
  }
  return static_cast<uint8_t*>(address);
}

// Registers `pages` with the runtime, mapped and portable (coarse-grained
// for kCachedHostPages): the device's address of them.
absl::StatusOr<uint8_t*> RegisterHostPages(const MemfdMapping& pages,
                                           HipPlacement placement) {
  unsigned int flags = hipHostRegisterMapped | hipHostRegisterPortable;
  if (placement == HipPlacement::kCachedHostPages) {
    flags |= hipExtHostRegisterCoarseGrained;
  }
  hipError_t error = hipHostRegister(pages.data(), pages.size(), flags);
  void* mapped = nullptr;
  if (error == hipSuccess) {
    error = hipHostGetDevicePointer(&mapped, pages.data(), 0);
    if (error != hipSuccess) (void)hipHostUnregister(pages.data());
  }
  if (error != hipSuccess) {
    return HipStatus(
        error,
        absl::StrFormat("register %u bytes of shared memory", pages.size()),
        "hipHostRegister",
        "raise the daemon's locked-memory limit "
        "(LimitMEMLOCK), or allocate less shared memory");
  }
  return static_cast<uint8_t*>(mapped);
}

}  // namespace

absl::StatusOr<std::shared_ptr<HipMemory>> HipMemory::Adopt(
    int device, int fd, uint64_t bytes, MemoryKind kind, HipPlacement placement,
    std::shared_ptr<HipReclaimer> reclaimer) {
  if (absl::Status bound = BindDevice(device); !bound.ok()) {
    close(fd);
    return bound;
  }
  // Its own accounting, holding exactly these bytes (it cannot refuse them):
  // the maker's tenant is the one charged.
  auto accounting = std::make_shared<MemoryAccounting>(
      bytes, "the maker's budget charges imported memory");
  if (absl::Status reserved = accounting->Reserve(bytes); !reserved.ok()) {
    close(fd);
    return reserved;
  }
  // The maker allocated at least one byte (see Create).
  auto pages = MemfdMapping::Adopt(fd, bytes == 0 ? 1 : bytes);
  absl::StatusOr<uint8_t*> device_address =
      pages.ok() ? RegisterHostPages(*pages, placement) : pages.status();
  if (!device_address.ok()) {
    accounting->Release(bytes);
    return device_address.status();
  }
  return std::shared_ptr<HipMemory>(
      new HipMemory(device, bytes, kind, *std::move(pages), *device_address,
                    std::move(accounting), std::move(reclaimer)));
}

absl::StatusOr<std::shared_ptr<HipMemory>> HipMemory::Create(
    int device, uint64_t bytes, MemoryKind kind, HipPlacement placement,
    bool zeroed, std::shared_ptr<MemoryAccounting> accounting,
    std::shared_ptr<HipReclaimer> reclaimer) {
  HRX_RETURN_IF_ERROR(BindDevice(device));
  HRX_RETURN_IF_ERROR(accounting->Reserve(bytes));
  // Neither runtime allocates zero bytes; one byte keeps every buffer a
  // real, distinct allocation.
  const uint64_t allocated = bytes == 0 ? 1 : bytes;
  std::optional<MemfdMapping> mapping;
  uint8_t* device_address = nullptr;
  if (placement == HipPlacement::kDeviceAllocation) {
    auto address = AllocateDevice(allocated, zeroed, *reclaimer);
    if (!address.ok()) {
      accounting->Release(bytes);
      return address.status();
    }
    device_address = *address;
  } else {
    // A fresh memfd reads as zero, so `zeroed` costs nothing here.
    auto pages = MemfdMapping::Create(allocated);
    if (!pages.ok()) {
      accounting->Release(bytes);
      return pages.status();
    }
    auto mapped = RegisterHostPages(*pages, placement);
    if (!mapped.ok()) {
      accounting->Release(bytes);
      return mapped.status();
    }
    device_address = *mapped;
    mapping.emplace(*std::move(pages));
  }
  return std::shared_ptr<HipMemory>(
      new HipMemory(device, bytes, kind, std::move(mapping), device_address,
                    std::move(accounting), std::move(reclaimer)));
}

HipMemory::HipMemory(int device, uint64_t size, MemoryKind kind,
                     std::optional<MemfdMapping> mapping,
                     uint8_t* device_address,
                     std::shared_ptr<MemoryAccounting> accounting,
                     std::shared_ptr<HipReclaimer> reclaimer)
    : device_(device),
      size_(size),
      kind_(kind),
      id_(NextMemoryId()),
      mapping_(std::move(mapping)),
      stream_ordered_(reclaimer->stream_ordered()),
      device_address_(device_address),
      accounting_(std::move(accounting)),
      reclaimer_(std::move(reclaimer)) {}

HipMemory::~HipMemory() {
  // The bytes are free for the daemon's accounting now; the runtime gets
  // them back on the reclaimer's thread (see hip_reclaimer.h).
  accounting_->Release(size_);
  if (mapping_) {
    auto pages = std::make_shared<MemfdMapping>(std::move(*mapping_));
    reclaimer_->Defer([pages] { (void)hipHostUnregister(pages->data()); });
  } else if (stream_ordered_) {
    // Every use has completed (queued commands hold a reference), so the
    // free needs no ordering beyond the allocation stream's.
    (void)hipFreeAsync(device_address_, reclaimer_->stream());
  } else {
    reclaimer_->Defer([address = device_address_] { (void)hipFree(address); });
  }
}

absl::StatusOr<int> HipMemory::ExportFd(ExportKind kind) const {
  if (mapping_) {
    return kind == ExportKind::kShm ? mapping_->ExportShm()
                                    : mapping_->ExportUdmabuf();
  }
  if (kind == ExportKind::kShm) {
    return Refusal(
        Reason::kNotHostMappable,
        absl::StrFormat(
            "export shm: this %u-byte buffer is memory of a discrete "
            "GPU, which has no host pages to share (ordinary buffers map only "
            "where the device is integrated, an APU). Fix: allocate it shared "
            "(Stream::AllocateShared) to map it, or export it as dma-buf.",
            size_));
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t address = reinterpret_cast<uint64_t>(device_address_);
  if (address % page != 0 || size_ % page != 0) {
    return Refusal(
        Reason::kDmabufUnaligned,
        absl::StrFormat(
            "export dma-buf: the driver exports whole %u-byte "
            "pages, and this buffer is %u bytes at an address %u bytes into a "
            "page. Fix: allocate a multiple of %u bytes.",
            page, size_, address % page, page));
  }
  HRX_RETURN_IF_ERROR(BindDevice(device_));
  int fd = -1;
  const hipError_t error =
      hip_platform::ExportDmaBuf(device_address_, size_, &fd);
  if (error == hipErrorNotSupported) {
    return Refusal(
        Reason::kDmabufUnavailable,
        absl::StrFormat(
            "export dma-buf: the %s GPU driver cannot export "
            "device memory as dma-buf. Fix: export a shared buffer (through "
            "udmabuf), or use a driver with dma-buf export.",
            hip_platform::Name()));
  }
  HRX_HIP_RETURN_IF_ERROR(error, "export dma-buf", "ExportDmaBuf",
                          "check the driver's dma-buf support (needs an "
                          "open kernel module on NVIDIA)");
  return fd;
}

}  // namespace hrx::backend
