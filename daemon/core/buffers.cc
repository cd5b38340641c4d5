#include "daemon/core/buffers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "shared/bytes.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using backend::MemoryRef;

backend::MemoryKind MemoryKindOf(AllocationKind kind) {
  return kind == AllocationKind::kShared ? backend::MemoryKind::kHostCoherent
                                         : backend::MemoryKind::kDevice;
}

}  // namespace

absl::StatusOr<BufferInfo> Buffers::Allocate(uint64_t session, uint64_t bytes,
                                             AllocationKind kind,
                                             uint64_t stream) {
  bytes = std::max<uint64_t>(bytes, 1);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "allocate"));
  const Resource resource = kind == AllocationKind::kShared
                                ? Resource::kSharedBytes
                                : Resource::kDeviceBytes;
  // Each live handle counts (on the CPU backend each also holds a
  // descriptor), whatever its size.
  HRX_ASSIGN_OR_RETURN(
      ChargeRef handle_charge,
      owner->tenant->Reserve(Resource::kBuffers, 1, "allocate", owner->Who()));
  // The reservation rides on the memory itself (below), so it is released
  // only when the last holder — the buffer table, a pool, or a queued
  // command — lets go.
  const std::string what =
      absl::StrFormat("allocate %s", shared::FormatBytes(bytes));
  absl::StatusOr<ChargeRef> reserved =
      owner->tenant->Reserve(resource, bytes, what, owner->Who());
  if (ReasonOf(reserved.status()) == Reason::kBudgetExhausted) {
    // Memory this session freed while a queued use held it comes back when
    // an executor reports that use done, possibly just after the client saw
    // it done on its ring: settled first, asked once more.
    sessions_.mirrors().SettleReleases(session);
    reserved = owner->tenant->Reserve(resource, bytes, what, owner->Who());
  }
  HRX_ASSIGN_OR_RETURN(ChargeRef charge, std::move(reserved));
  uint64_t origin = 0;
  MemoryRef memory;
  {
    absl::MutexLock lock(&owner->mu);
    if (stream != 0) {
      HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * entry,
                           owner->streams.Find(stream, "allocate stream"));
      origin = (*entry)->id;
    }
    // Only plain device memory is pooled: its contents are unspecified
    // anyway, and the pool is this session's own.
    if (kind == AllocationKind::kDevice) {
      memory = owner->allocation_pool.Take(bytes);
    }
  }
  if (memory == nullptr) {
    HRX_ASSIGN_OR_RETURN(std::shared_ptr<backend::Backend> backend,
                         devices_.For(*owner->tenant));
    // A backend shared with other tenants may hand back their freed
    // memory: it comes zeroed, whatever was asked.
    const bool zeroed =
        kind == AllocationKind::kZeroed || !devices_.Exclusive(*owner->tenant);
    auto fresh = backend->Allocate(bytes, MemoryKindOf(kind), zeroed);
    if (!fresh.ok() &&
        fresh.status().code() == absl::StatusCode::kResourceExhausted) {
      // Memory parked in this session's pools is given back before refusing.
      {
        absl::MutexLock lock(&owner->mu);
        owner->allocation_pool = AllocationPool();
        owner->staging_pool = StagingPool();
      }
      fresh = backend->Allocate(bytes, MemoryKindOf(kind), zeroed);
    }
    if (!fresh.ok()) return fresh.status();
    MemoryRef raw = *std::move(fresh);
    backend::Memory* address = raw.get();
    memory = MemoryRef(
        address, [raw = std::move(raw), charge](backend::Memory*) mutable {
          raw.reset();  // the memory first, then its reservation
          charge.reset();
        });
  }
  const uint64_t allocation_id = memory->id();
  absl::MutexLock lock(&owner->mu);
  const uint64_t handle = owner->buffers.Insert(
      BufferEntry{std::move(memory), origin, std::move(handle_charge)});
  return BufferInfo{handle, bytes, allocation_id};
}

absl::StatusOr<Buffers::Described> Buffers::Describe(uint64_t session,
                                                     uint64_t buffer,
                                                     std::string_view what) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(BufferEntry * entry, owner->buffers.Find(buffer, what));
  return Described{entry->memory, entry->origin_stream};
}

absl::Status Buffers::Free(uint64_t session, uint64_t buffer) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  backend::MemoryRef memory;
  bool shared_out = false;
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(BufferEntry entry,
                         owner->buffers.Remove(buffer, "free buffer"));
    memory = std::move(entry.memory);
    shared_out = entry.shared_out;
    const uint64_t id = memory->id();
    owner->streams.ForEach([id](const std::shared_ptr<StreamEntry>& stream) {
      stream->dispatch_cache.EvictMemory(id);
      stream->transfer_cache.EvictMemory(id);
    });
  }
  // The handle is gone, so no new grant can name it (Sharing::Grant looks
  // again after inserting); Sharing's lock is never taken under a
  // session's. Nor does any copy of the session's tables open it once the
  // free is answered.
  sharing_.RevokeGrantsOf(session, memory.get());
  sessions_.mirrors().Revoke(session, buffer);
  // Only memory that never left the session is pooled (an importer or a
  // descriptor may still hold the rest), and only for a tenant without a
  // device budget: a budgeted tenant gets its bytes back once the last
  // queued use completes.
  if (memory->kind() == backend::MemoryKind::kDevice &&
      owner->tenant->Unlimited(Resource::kDeviceBytes) && !shared_out) {
    absl::MutexLock lock(&owner->mu);
    owner->allocation_pool.Give(std::move(memory));
  }
  return absl::OkStatus();
}

}  // namespace hrx::daemon
