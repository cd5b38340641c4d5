#include "hrx/kernel.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "shared/refusal.h"
#include "shared/span_check.h"

namespace hrx {

Kernel::Kernel(std::shared_ptr<client::internal::Connection> connection,
               Handle handle, std::string symbol,
               std::vector<KernelArgument> layout)
    : connection_(std::move(connection)),
      handle_(handle),
      symbol_(std::move(symbol)),
      layout_(std::move(layout)) {
  info_.parameter_count = static_cast<uint32_t>(layout_.size());
  for (const KernelArgument& arg : layout_) {
    if (arg.kind == 1) info_.constant_byte_length += arg.size;
    if (arg.kind == 2) ++info_.binding_count;
  }
}

Kernel::Kernel(Kernel&& other) noexcept
    : connection_(std::move(other.connection_)),
      handle_(std::exchange(other.handle_, Handle{})),
      symbol_(std::move(other.symbol_)),
      layout_(std::move(other.layout_)),
      info_(other.info_) {}

Kernel& Kernel::operator=(Kernel&& other) noexcept {
  if (this != &other) {
    Unload();
    connection_ = std::move(other.connection_);
    handle_ = std::exchange(other.handle_, Handle{});
    symbol_ = std::move(other.symbol_);
    layout_ = std::move(other.layout_);
    info_ = other.info_;
  }
  return *this;
}

Kernel::~Kernel() { Unload(); }

void Kernel::Unload() {
  std::shared_ptr<client::internal::Connection> connection =
      std::move(connection_);
  if (connection == nullptr) return;
  // Dispatches already issued go out first; the daemon keeps the code
  // until they ran.
  (void)connection->FlushAll();
  auto context = connection->Context();
  hrx::v1::UnloadKernelRequest request;
  client::internal::ToProto(std::exchange(handle_, Handle{}),
                            request.mutable_kernel());
  hrx::v1::UnloadKernelResponse response;
  (void)connection->kernels().UnloadKernel(context.get(), request, &response);
}

uint64_t Kernel::brand() const {
  return connection_ != nullptr ? connection_->brand() : 0;
}

absl::Status Constants::FullError(size_t adding) const {
  return Refusal(
      Reason::kConstantsFull,
      absl::StrFormat("push %u bytes onto %u of %u bytes of constants. Fix: "
                      "pass fewer or narrower scalars.",
                      adding, length_, kCapacity));
}

absl::StatusOr<Constants> Constants::FromBytes(std::span<const uint8_t> bytes) {
  if (absl::Status span =
          shared::CheckSpan("constants from bytes", 0, bytes.size(), kCapacity);
      !span.ok()) {
    return span;
  }
  Constants constants;
  std::memcpy(constants.bytes_.data(), bytes.data(), bytes.size());
  constants.length_ = bytes.size();
  return constants;
}

absl::StatusOr<Constants> Constants::Indices(const Kernel& kernel,
                                             std::span<const uint32_t> values) {
  const uint64_t size = kernel.info().constant_byte_length;
  Constants constants;
  if (values.empty()) {
    if (size != 0) {
      return Refusal(
          Reason::kMissingIndexConstants,
          absl::StrFormat("kernel %s takes %u bytes of constants and "
                          "no indices were given. Fix: pass its index values.",
                          kernel.symbol(), size));
    }
    return constants;
  }
  if (size == values.size() * 4) {
    for (uint32_t value : values) {
      if (absl::Status pushed = constants.Push(value); !pushed.ok())
        return pushed;
    }
  } else if (size == values.size() * 8) {
    for (uint32_t value : values) {
      if (absl::Status pushed = constants.Push(uint64_t{value}); !pushed.ok()) {
        return pushed;
      }
    }
  } else {
    return Refusal(
        Reason::kNotIndexList,
        absl::StrFormat("kernel %s takes %u bytes of constants, which is not "
                        "%u indices of 4 or 8 bytes. Fix: push its scalars "
                        "with Push at their "
                        "declared widths.",
                        kernel.symbol(), size, values.size()));
  }
  return constants;
}

}  // namespace hrx
