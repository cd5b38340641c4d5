#include "daemon/backend/cpu/cpu_backend.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/backend/cpu/cpu_kernel.h"
#include "daemon/backend/cpu/cpu_queue.h"

namespace hrx::backend {
namespace {

uint64_t HalfOfPhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown CPU";
}

// The CPU target is the machine's architecture: CPU kernels are native code.
std::string MachineTarget() {
  utsname names{};
  if (uname(&names) != 0) return "unknown";
  return names.machine;
}

DeviceProperties MakeProperties(uint64_t memory_bytes) {
  DeviceProperties properties;
  properties.backend = "cpu";
  properties.name = absl::StrCat(CpuModelName(), " (embedded CPU backend)");
  properties.target = MachineTarget();
  properties.memory_bytes = memory_bytes;
  properties.integrated = true;  // its device memory is a memfd
  return properties;
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : properties_(MakeProperties(options.memory_bytes != 0
                                     ? options.memory_bytes
                                     : HalfOfPhysicalMemory())),
      accounting_(std::make_shared<MemoryAccounting>(
          properties_.memory_bytes,
          "start hrxd with a larger --cpu_memory_bytes")),
      pool_(std::max(1u, std::thread::hardware_concurrency())) {}

absl::StatusOr<MemoryRef> CpuBackend::ImportShm(int fd, uint64_t bytes,
                                                MemoryKind kind) {
  auto memory = CpuMemory::Adopt(fd, bytes, kind);
  if (!memory.ok()) return memory.status();
  return MemoryRef(*std::move(memory));
}

absl::StatusOr<MemoryRef> CpuBackend::Allocate(uint64_t bytes, MemoryKind kind,
                                               bool zeroed) {
  // A fresh memfd reads as zero, so `zeroed` costs nothing here.
  (void)zeroed;
  auto memory = CpuMemory::Create(bytes, kind, accounting_);
  if (!memory.ok()) return memory.status();
  return MemoryRef(*std::move(memory));
}

absl::StatusOr<std::unique_ptr<Queue>> CpuBackend::CreateQueue() {
  return std::unique_ptr<Queue>(std::make_unique<CpuQueue>(pool_));
}

absl::StatusOr<KernelRef> CpuBackend::LoadKernel(std::string_view code,
                                                 const std::string& entry) {
  auto kernel = CpuKernel::Load(code, entry);
  if (!kernel.ok()) return kernel.status();
  return KernelRef(*std::move(kernel));
}

std::vector<ExportKind> CpuBackend::export_kinds() const {
  std::vector<ExportKind> kinds = {ExportKind::kShm};
  if (UdmabufAvailable()) kinds.push_back(ExportKind::kDmaBuf);
  return kinds;
}

uint64_t CpuBackend::bytes_in_use() const {
  return accounting_->in_use_bytes();
}

}  // namespace hrx::backend
