// libhrx kernels and their constants, mirroring the in-process runtime's
// Kernel, ExportInfo and Constants.
//
// Threading: a Kernel may be used from several streams and destroyed from
// any thread. Constants is a value type.
#ifndef HRX_CLIENT_INCLUDE_HRX_KERNEL_H_
#define HRX_CLIENT_INCLUDE_HRX_KERNEL_H_

#include <array>
#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hrx/buffer.h"

namespace hrx {

namespace client::internal {
class Connection;
}  // namespace client::internal

// Argument and launch metadata of a loaded kernel.
struct ExportInfo {
  std::array<uint32_t, 3> workgroup_size = {0, 0, 0};  // 0: any size there
  uint32_t parameter_count = 0;
  uint32_t constant_byte_length = 0;  // sum of the scalar arguments' widths
  uint32_t binding_count = 0;         // buffer arguments
};

// One argument in declaration order: kind 1 is a scalar of `size` bytes,
// kind 2 a buffer binding (size 0).
struct KernelArgument {
  uint32_t kind = 0;
  uint32_t size = 0;
};

// A kernel loaded into the daemon. Move-only; destroying it unloads it
// (queued dispatches keep their code until they ran).
class Kernel {
 public:
  Kernel(Kernel&&) noexcept;
  Kernel& operator=(Kernel&&) noexcept;
  ~Kernel();

  const ExportInfo& info() const { return info_; }
  const std::vector<KernelArgument>& layout() const { return layout_; }
  const std::string& symbol() const { return symbol_; }
  const Handle& handle() const { return handle_; }
  uint64_t brand() const;

 private:
  friend class Stream;
  Kernel(std::shared_ptr<client::internal::Connection> connection,
         Handle handle, std::string symbol, std::vector<KernelArgument> layout);
  void Unload();

  std::shared_ptr<client::internal::Connection> connection_;
  Handle handle_;
  std::string symbol_;
  std::vector<KernelArgument> layout_;
  ExportInfo info_;
};

template <typename T>
concept KernelScalar = std::same_as<T, uint32_t> || std::same_as<T, int32_t> ||
    std::same_as<T, float> || std::same_as<T, uint64_t> ||
    std::same_as<T, int64_t> || std::same_as<T, double>;

// Scalars packed little-endian in declaration order, at their explicit
// widths, with no implicit alignment: at most kCapacity bytes.
class Constants {
 public:
  static constexpr size_t kCapacity = 256;

  // Appends `value`; INVALID_ARGUMENT ("constants_full") past the capacity.
  template <KernelScalar T>
  absl::Status Push(T value) {
    static_assert(std::endian::native == std::endian::little,
                  "hrx packs constants little-endian");
    if (sizeof(T) > kCapacity - length_) return FullError(sizeof(T));
    std::memcpy(bytes_.data() + length_, &value, sizeof(T));
    length_ += sizeof(T);
    return absl::OkStatus();
  }

  // An explicitly contracted block of packed bytes.
  static absl::StatusOr<Constants> FromBytes(std::span<const uint8_t> bytes);

  // For kernels whose scalars are all unsigned indices of one width: packs
  // `values` as 32- or 64-bit slots, whichever the kernel's constant size
  // says. INVALID_ARGUMENT when it is neither.
  static absl::StatusOr<Constants> Indices(const Kernel& kernel,
                                           std::span<const uint32_t> values);

  std::span<const uint8_t> bytes() const { return {bytes_.data(), length_}; }
  size_t size() const { return length_; }

 private:
  absl::Status FullError(size_t adding) const;

  std::array<uint8_t, kCapacity> bytes_{};
  size_t length_ = 0;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_KERNEL_H_
