// HIP-backend allocations, placed as hip_placement.h decides:
//   device allocation      hipMalloc memory. The host cannot map it; it
//                          leaves the daemon only as a driver dma-buf.
//   registered host pages  a memfd mapping registered with the runtime
//                          (hipHostRegister, mapped): the client's mapping
//                          of the memfd, the daemon's and the device see
//                          the same pages. Every host-coherent buffer, and
//                          on an integrated device (an APU) every buffer:
//                          there this is the zero-copy path; on a discrete
//                          GPU the device reaches the pages over the bus and
//                          copies from them run at pinned-memory speed.
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_MEMORY_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_MEMORY_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/hip/hip_placement.h"
#include "daemon/backend/hip/hip_reclaimer.h"
#include "daemon/backend/memfd_memory.h"

namespace hrx::backend {

class HipMemory final : public Memory {
 public:
  // Reserves `bytes` against `accounting`, then allocates on `device` as
  // `placement` says; the memory goes back to the runtime through
  // `reclaimer`. `kind` is what the buffer was asked as.
  static absl::StatusOr<std::shared_ptr<HipMemory>> Create(
      int device, uint64_t bytes, MemoryKind kind, HipPlacement placement,
      bool zeroed, std::shared_ptr<MemoryAccounting> accounting,
      std::shared_ptr<HipReclaimer> reclaimer);
  // Memory another executor of this device made, from its shm descriptor
  // (taking `fd`): the same pages, registered with this process's runtime
  // for `device` as `placement` says (host pages of either grain). Charged
  // where it was made, so not against this backend's accounting; the maker
  // keeps the pages when this goes.
  static absl::StatusOr<std::shared_ptr<HipMemory>> Adopt(
      int device, int fd, uint64_t bytes, MemoryKind kind,
      HipPlacement placement, std::shared_ptr<HipReclaimer> reclaimer);
  ~HipMemory() override;
  HipMemory(const HipMemory&) = delete;
  HipMemory& operator=(const HipMemory&) = delete;

  uint64_t size() const override { return size_; }
  MemoryKind kind() const override { return kind_; }
  uint64_t id() const override { return id_; }
  uint8_t* host_address() const override {
    return mapping_ ? mapping_->data() : nullptr;
  }
  absl::StatusOr<int> ExportFd(ExportKind kind) const override;

  // The address kernels and copies use (for registered host pages, the
  // device's view of them).
  uint8_t* device_address() const { return device_address_; }

 private:
  HipMemory(int device, uint64_t size, MemoryKind kind,
            std::optional<MemfdMapping> mapping, uint8_t* device_address,
            std::shared_ptr<MemoryAccounting> accounting,
            std::shared_ptr<HipReclaimer> reclaimer);

  const int device_;
  const uint64_t size_;
  const MemoryKind kind_;
  const uint64_t id_;
  std::optional<MemfdMapping> mapping_;  // registered host pages only
  // A device allocation: from the stream-ordered allocator (else hipMalloc).
  const bool stream_ordered_;
  uint8_t* const device_address_;
  const std::shared_ptr<MemoryAccounting> accounting_;
  const std::shared_ptr<HipReclaimer> reclaimer_;
};

// The device memory of `memory` at `offset`: what launches and copies use.
inline uint8_t* DeviceAddress(const Memory& memory, uint64_t offset) {
  return static_cast<const HipMemory&>(memory).device_address() + offset;
}

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_MEMORY_H_
