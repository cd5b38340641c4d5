#include "daemon/executor/work_report.h"

namespace hrx::executor {
namespace {

namespace wire = hrx::executor::v1;

void EncodeCounters(const daemon::StoreStats& stats, wire::Counters* out) {
  out->set_entries(stats.entries);
  out->set_bytes(stats.bytes);
  out->set_hits(stats.hits);
  out->set_misses(stats.misses);
  out->set_evictions(stats.evictions);
}

daemon::StoreStats DecodeCounters(const wire::Counters& counters) {
  daemon::StoreStats stats;
  stats.entries = counters.entries();
  stats.bytes = counters.bytes();
  stats.hits = counters.hits();
  stats.misses = counters.misses();
  stats.evictions = counters.evictions();
  return stats;
}

}  // namespace

void EncodeWork(const daemon::WorkTotals& work, wire::WorkTotals* out) {
  out->set_commands_submitted(work.commands_submitted);
  EncodeCounters(work.dispatch_cache, out->mutable_dispatch_cache());
  EncodeCounters(work.transfer_cache, out->mutable_transfer_cache());
  EncodeCounters(work.allocation_pool, out->mutable_allocation_pool());
  EncodeCounters(work.staging_pool, out->mutable_staging_pool());
  EncodeCounters(work.upload_staging, out->mutable_upload_staging());
  out->set_suspended_streams(work.suspended_streams);
  out->set_parked_operations(work.parked_operations);
}

daemon::WorkTotals DecodeWork(const wire::WorkTotals& work) {
  daemon::WorkTotals totals;
  totals.commands_submitted = work.commands_submitted();
  totals.dispatch_cache = DecodeCounters(work.dispatch_cache());
  totals.transfer_cache = DecodeCounters(work.transfer_cache());
  totals.allocation_pool = DecodeCounters(work.allocation_pool());
  totals.staging_pool = DecodeCounters(work.staging_pool());
  totals.upload_staging = DecodeCounters(work.upload_staging());
  totals.suspended_streams = work.suspended_streams();
  totals.parked_operations = work.parked_operations();
  return totals;
}

}  // namespace hrx::executor
