// A table of objects named by handles (kind, slot, generation), never by
// pointers. Lookups refuse a handle of the wrong kind (INVALID_ARGUMENT,
// "wrong_handle_kind"), a slot never issued (NOT_FOUND, "unknown_handle") and
// a freed object (NOT_FOUND, "stale_handle"): a freed slot's generation moves
// on, so an old handle never resolves to the object that reuses the slot.
//
// Thread-compatible: the owner serializes access.
#ifndef HRX_DAEMON_CORE_HANDLE_TABLE_H_
#define HRX_DAEMON_CORE_HANDLE_TABLE_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "shared/handle.h"
#include "shared/refusal.h"

namespace hrx::daemon {

// Slots a mirror (InsertAt) may name: a table's own slots are bounded by
// the ceilings on what it holds, far below this.
inline constexpr uint32_t kMaxMirroredSlots = 1u << 20;

template <typename T>
class HandleTable {
 public:
  explicit HandleTable(shared::HandleKind kind) : kind_(kind) {}

  // Stores `value` and returns its wire handle.
  uint64_t Insert(T value) {
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& entry = slots_[slot];
    entry.value.emplace(std::move(value));
    ++live_;
    return shared::Handle{kind_, slot, entry.generation}.Encode();
  }

  // Stores `value` under `wire`, a handle another table issued (a mirror of
  // that table in another process: an executor's copy of hrxd's session,
  // where the issuing table alone decides which handles are live, and an
  // object revoked there may be installed again).
  // FAILED_PRECONDITION when `wire` is of another kind, generation 0, or its
  // slot holds an object. A mirror never Inserts: its slots are the issuing
  // table's.
  absl::Status InsertAt(uint64_t wire, T value) {
    const shared::Handle handle = shared::Handle::Decode(wire);
    if (handle.kind != kind_ || handle.generation == 0 ||
        handle.slot >= kMaxMirroredSlots) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "handle %#x cannot be mirrored here (kind %s, slot %u). Fix: "
          "report a bug.",
          wire, shared::HandleKindName(handle.kind), handle.slot));
    }
    if (handle.slot >= slots_.size()) slots_.resize(handle.slot + 1);
    Slot& slot = slots_[handle.slot];
    if (slot.value) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "handle %#x: slot %u holds an object (generation %u). Fix: report "
          "a bug.",
          wire, handle.slot, slot.generation));
    }
    slot.generation = handle.generation;
    slot.value.emplace(std::move(value));
    ++live_;
    return absl::OkStatus();
  }

  // `what` names the use in refusals, e.g. "fill dst".
  absl::StatusOr<T*> Find(uint64_t wire, std::string_view what) {
    auto slot = Resolve(wire, what);
    if (!slot.ok()) return slot.status();
    return &*(*slot)->value;
  }

  // Removes the object; its handle (and every copy of it) becomes stale.
  absl::StatusOr<T> Remove(uint64_t wire, std::string_view what) {
    auto resolved = Resolve(wire, what);
    if (!resolved.ok()) return resolved.status();
    Slot& slot = **resolved;
    T value = std::move(*slot.value);
    slot.value.reset();
    --live_;
    // A slot whose 24-bit generation is spent is retired, never reused.
    if (++slot.generation <= shared::Handle::kGenerationMask) {
      free_slots_.push_back(shared::Handle::Decode(wire).slot);
    }
    return value;
  }

  // Removes every object, passing each to `visit`.
  template <typename Visit>
  void Clear(Visit visit) {
    for (Slot& slot : slots_) {
      if (slot.value) {
        visit(std::move(*slot.value));
        slot.value.reset();
      }
    }
    live_ = 0;
  }

  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const Slot& slot : slots_) {
      if (slot.value) visit(*slot.value);
    }
  }

  // Visits each live object with its wire handle.
  template <typename Visit>
  void ForEachHandle(Visit visit) const {
    for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
      if (slots_[slot].value) {
        visit(shared::Handle{kind_, slot, slots_[slot].generation}.Encode(),
              *slots_[slot].value);
      }
    }
  }

  size_t size() const { return live_; }

 private:
  struct Slot {
    uint32_t generation = 1;  // 0 is never issued
    std::optional<T> value;
  };

  absl::StatusOr<Slot*> Resolve(uint64_t wire, std::string_view what) {
    const shared::Handle handle = shared::Handle::Decode(wire);
    const std::string_view want = shared::HandleKindName(kind_);
    if (handle.kind != kind_) {
      return Refusal(
          Reason::kWrongHandleKind,
          absl::StrFormat("%s: handle %#x is a %s handle where a %s handle "
                          "is required. Fix: pass the %s handle returned when "
                          "it was created.",
                          what, wire, shared::HandleKindName(handle.kind), want,
                          want));
    }
    if (handle.slot >= slots_.size() || handle.generation == 0 ||
        handle.generation > slots_[handle.slot].generation) {
      return Refusal(
          Reason::kUnknownHandle,
          absl::StrFormat(
              "%s: %s handle %#x (slot %u, generation %u) was "
              "never issued in this session. Fix: pass a handle this session "
              "created.",
              what, want, wire, handle.slot, handle.generation));
    }
    Slot& slot = slots_[handle.slot];
    if (handle.generation != slot.generation || !slot.value) {
      return Refusal(
          Reason::kStaleHandle,
          absl::StrFormat("%s: %s handle %#x (slot %u, generation %u) names a "
                          "%s that was already freed. Fix: do not use a %s "
                          "after freeing it.",
                          what, want, wire, handle.slot, handle.generation,
                          want, want));
    }
    return &slot;
  }

  const shared::HandleKind kind_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  size_t live_ = 0;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_HANDLE_TABLE_H_
