#include "daemon/server/encode_stats.h"

namespace hrx::daemon {

void EncodeCounters(const StoreStats& stats, hrx::v1::CacheCounters* out) {
  out->set_entries(stats.entries);
  out->set_bytes(stats.bytes);
  out->set_hits(stats.hits);
  out->set_misses(stats.misses);
  out->set_evictions(stats.evictions);
}

void EncodeStreamStats(const StreamStats& stats,
                       hrx::v1::StreamStatsResponse* out) {
  out->set_queue(stats.queue);
  out->set_published_fence(stats.published_fence);
  out->set_completed_fence(stats.completed_fence);
  for (uint64_t id : stats.pending_staging_ids) {
    out->add_pending_staging_ids(id);
  }
  out->set_pending_staging_bytes(stats.pending_staging_bytes);
  for (uint64_t id : stats.completed_staging_ids) {
    out->add_completed_staging_ids(id);
  }
  EncodeCounters(stats.upload_staging, out->mutable_upload_staging());
  EncodeCounters(stats.dispatch_cache, out->mutable_dispatch_cache());
  EncodeCounters(stats.transfer_cache, out->mutable_transfer_cache());
}

}  // namespace hrx::daemon
