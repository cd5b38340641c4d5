// libhrx mappings: a buffer's memory mapped into this process through a
// descriptor the daemon handed over (a resident handle), so bulk data never
// travels through messages.
//
// Coherence (docs/resident-handles.md): the mapping and the device see the
// same pages. Before reading what device work wrote, synchronize the stream
// (or an event) that wrote it. Before device work reads what you wrote,
// finish writing before you enqueue that work. Never write while device work
// that touches the same bytes may still run.
//
// Threading: a Mapping is a value owned by one thread at a time.
#ifndef HRX_CLIENT_INCLUDE_HRX_MAPPING_H_
#define HRX_CLIENT_INCLUDE_HRX_MAPPING_H_

#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hrx {

namespace client::internal {
class Connection;
// INVALID_ARGUMENT ("mapping_not_typed") naming both sizes.
absl::Status MappingNotTyped(uint64_t mapping_bytes, uint64_t element_bytes);
}  // namespace client::internal

class Mapping {
 public:
  Mapping(Mapping&&) noexcept;
  Mapping& operator=(Mapping&&) noexcept;
  // Unmaps and tells the daemon this process no longer holds the memory.
  ~Mapping();

  std::span<uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

  // The mapping as `T`s. INVALID_ARGUMENT ("mapping_not_typed") when its
  // size is not a whole number of them.
  template <typename T>
  absl::StatusOr<std::span<T>> As() const {
    static_assert(std::is_trivially_copyable_v<T>);
    if (size_ % sizeof(T) != 0) {
      return client::internal::MappingNotTyped(size_, sizeof(T));
    }
    return std::span<T>(reinterpret_cast<T*>(data_), size_ / sizeof(T));
  }

 private:
  friend class Buffer;
  Mapping(std::shared_ptr<client::internal::Connection> connection,
          uint8_t* data, uint64_t size, uint64_t export_id)
      : connection_(std::move(connection)),
        data_(data),
        size_(size),
        export_id_(export_id) {}
  void Release();

  std::shared_ptr<client::internal::Connection> connection_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t export_id_ = 0;
};

}  // namespace hrx

#endif  // HRX_CLIENT_INCLUDE_HRX_MAPPING_H_
