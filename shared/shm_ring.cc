#include "shared/shm_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <new>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"

namespace hrx::shared {
namespace {

absl::Status Broken(std::string_view what, uint64_t written, uint64_t read,
                    uint64_t capacity) {
  return Refusal(
      Reason::kRingBroken,
      absl::StrFormat(
          "the stream's shared ring is corrupt: %s (written %u, read %u, "
          "capacity %u). Fix: do not write the ring's positions except "
          "through libhrx; open a new stream.",
          what, written, read, capacity));
}

}  // namespace

uint64_t RingRegionBytes(uint64_t submit_bytes, uint64_t complete_bytes) {
  return kRingHeaderBytes + submit_bytes + complete_bytes;
}

void InitRingRegion(void* region, uint64_t submit_bytes,
                    uint64_t complete_bytes) {
  auto* header = new (region) RingHeader();
  header->magic = kRingMagic;
  header->version = kRingVersion;
  header->submit_offset = kRingHeaderBytes;
  header->submit_bytes = submit_bytes;
  header->complete_offset = kRingHeaderBytes + submit_bytes;
  header->complete_bytes = complete_bytes;
}

absl::Status CheckRingRegion(const void* region, uint64_t region_bytes) {
  if (region_bytes < kRingHeaderBytes) {
    return Refusal(Reason::kRingUnavailable,
                   absl::StrFormat("the ring region is %u bytes, smaller than "
                                   "its %u-byte header. Fix: use a libhrx of "
                                   "the daemon's version.",
                                   region_bytes, kRingHeaderBytes));
  }
  const auto* header = static_cast<const RingHeader*>(region);
  const bool fits =
      header->submit_offset == kRingHeaderBytes &&
      header->submit_bytes <= region_bytes &&
      header->complete_offset == kRingHeaderBytes + header->submit_bytes &&
      header->complete_bytes <= region_bytes &&
      RingRegionBytes(header->submit_bytes, header->complete_bytes) ==
          region_bytes &&
      header->submit_bytes >= 64 && header->complete_bytes >= 64;
  if (header->magic != kRingMagic || header->version != kRingVersion || !fits) {
    return Refusal(
        Reason::kRingUnavailable,
        absl::StrFormat(
            "the ring region (%u bytes, magic %#x, version %u, pipes %u and "
            "%u bytes) is not a version %u ring. Fix: use a libhrx of the "
            "daemon's version, or the gRPC transport (HRX_TRANSPORT=grpc).",
            region_bytes, header->magic, header->version, header->submit_bytes,
            header->complete_bytes, kRingVersion));
  }
  return absl::OkStatus();
}

// --- PipeWriter --------------------------------------------------------------

PipeWriter::PipeWriter(uint8_t* data, uint64_t capacity, RingPosition* written,
                       const RingPosition* read)
    : data_(data), capacity_(capacity), written_(written), read_(read) {
  position_ = written_->value.load(std::memory_order_relaxed);
}

absl::StatusOr<uint64_t> PipeWriter::FreeBytes() const {
  const uint64_t read = read_->value.load(std::memory_order_acquire);
  if (read > position_ || position_ - read > capacity_) {
    return Broken("the reader's position is impossible", position_, read,
                  capacity_);
  }
  return capacity_ - (position_ - read);
}

absl::StatusOr<uint64_t> PipeWriter::Unread() const {
  const absl::StatusOr<uint64_t> free = FreeBytes();
  if (!free.ok()) return free.status();
  return capacity_ - *free;
}

absl::StatusOr<uint64_t> PipeWriter::Push(std::string_view bytes) {
  const absl::StatusOr<uint64_t> free = FreeBytes();
  if (!free.ok()) return free.status();
  const uint64_t length = std::min<uint64_t>(*free, bytes.size());
  if (length == 0) return 0;  // nothing to publish
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = (position_ + done) % capacity_;
    const uint64_t run = std::min(length - done, capacity_ - at);
    std::memcpy(data_ + at, bytes.data() + done, run);
    done += run;
  }
  position_ += length;
  written_->value.store(position_, std::memory_order_release);
  return length;
}

// --- PipeReader --------------------------------------------------------------

PipeReader::PipeReader(const uint8_t* data, uint64_t capacity,
                       const RingPosition* written, RingPosition* read)
    : data_(data), capacity_(capacity), written_(written), read_(read) {
  position_ = read_->value.load(std::memory_order_relaxed);
}

absl::StatusOr<uint64_t> PipeReader::Available() const {
  const uint64_t written = written_->value.load(std::memory_order_acquire);
  if (written < position_ || written - position_ > capacity_) {
    return Broken("the writer's position is impossible", written, position_,
                  capacity_);
  }
  return written - position_;
}

absl::StatusOr<uint64_t> PipeReader::Pull(uint8_t* out, uint64_t length) {
  const absl::StatusOr<uint64_t> available = Available();
  if (!available.ok()) return available.status();
  length = std::min(length, *available);
  if (length == 0) return 0;  // nothing taken: the position stays as it is
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = (position_ + done) % capacity_;
    const uint64_t run = std::min(length - done, capacity_ - at);
    std::memcpy(out + done, data_ + at, run);
    done += run;
  }
  position_ += length;
  read_->value.store(position_, std::memory_order_release);
  return length;
}

// --- Messages ----------------------------------------------------------------

absl::StatusOr<bool> MessageWriter::Start(std::string message) {
  const uint64_t length = message.size();
  pending_.clear();
  pending_.reserve(4 + length);
  for (int i = 0; i < 4; ++i) {
    pending_.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  pending_.append(message);
  sent_ = 0;
  return Continue();
}

absl::StatusOr<bool> MessageWriter::Continue() {
  if (idle()) return true;
  const absl::StatusOr<uint64_t> pushed =
      pipe_.Push(std::string_view(pending_).substr(sent_));
  if (!pushed.ok()) return pushed.status();
  sent_ += *pushed;
  if (!idle()) return false;
  pending_.clear();
  pending_.shrink_to_fit();  // a large message's copy does not linger
  sent_ = 0;
  return true;
}

absl::StatusOr<bool> MessageReader::Next(std::string* out) {
  while (header_read_ < 4) {
    const absl::StatusOr<uint64_t> got =
        pipe_.Pull(header_ + header_read_, 4 - header_read_);
    if (!got.ok()) return got.status();
    if (*got == 0) return false;
    header_read_ += *got;
    if (header_read_ < 4) continue;
    length_ = uint64_t{header_[0]} | uint64_t{header_[1]} << 8 |
              uint64_t{header_[2]} << 16 | uint64_t{header_[3]} << 24;
    if (length_ > max_message_bytes_) {
      return Refusal(
          Reason::kRingMessageTooLarge,
          absl::StrFormat(
              "a message on the stream's ring claims %u bytes, past the "
              "%u-byte limit. Fix: split batches and reads (libhrx does), "
              "see docs/limits.md.",
              length_, max_message_bytes_));
    }
    body_.clear();
    body_read_ = 0;
  }
  while (body_read_ < length_) {
    const absl::StatusOr<uint64_t> available = pipe_.Available();
    if (!available.ok()) return available.status();
    if (*available == 0) return false;
    const uint64_t take = std::min(length_ - body_read_, *available);
    body_.resize(body_read_ + take);  // only as far as bytes have come
    const absl::StatusOr<uint64_t> got =
        pipe_.Pull(reinterpret_cast<uint8_t*>(body_.data()) + body_read_, take);
    if (!got.ok()) return got.status();
    body_read_ += *got;
    body_.resize(body_read_);
    if (*got == 0) return false;
  }
  out->swap(body_);
  body_.clear();
  header_read_ = 0;
  length_ = 0;
  body_read_ = 0;
  return true;
}

// --- Pipe ends of a region ---------------------------------------------------

namespace {

RingHeader& HeaderOf(void* region) { return *static_cast<RingHeader*>(region); }
uint8_t* At(void* region, uint64_t offset) {
  return static_cast<uint8_t*>(region) + offset;
}

}  // namespace

PipeWriter SubmitWriter(void* region) {
  RingHeader& h = HeaderOf(region);
  return PipeWriter(At(region, h.submit_offset), h.submit_bytes,
                    &h.submit_written, &h.submit_read);
}

PipeReader SubmitReader(void* region) {
  RingHeader& h = HeaderOf(region);
  return PipeReader(At(region, h.submit_offset), h.submit_bytes,
                    &h.submit_written, &h.submit_read);
}

PipeWriter CompleteWriter(void* region) {
  RingHeader& h = HeaderOf(region);
  return PipeWriter(At(region, h.complete_offset), h.complete_bytes,
                    &h.complete_written, &h.complete_read);
}

PipeReader CompleteReader(void* region) {
  RingHeader& h = HeaderOf(region);
  return PipeReader(At(region, h.complete_offset), h.complete_bytes,
                    &h.complete_written, &h.complete_read);
}

// --- Doorbells ---------------------------------------------------------------

void RingDoorbell(RingBell& bell) {
  bell.bell.fetch_add(1, std::memory_order_seq_cst);
  if (bell.sleeping.load(std::memory_order_seq_cst) != 0) {
    // Shared (not FUTEX_PRIVATE): the waiter is another process.
    syscall(SYS_futex, &bell.bell, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

void WaitOnDoorbell(RingBell& bell, uint32_t seen, absl::Duration timeout) {
  bell.sleeping.fetch_add(1, std::memory_order_seq_cst);
  if (bell.bell.load(std::memory_order_seq_cst) == seen) {
    const timespec relative = absl::ToTimespec(timeout);
    syscall(SYS_futex, &bell.bell, FUTEX_WAIT, seen, &relative, nullptr, 0);
  }
  bell.sleeping.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace hrx::shared
