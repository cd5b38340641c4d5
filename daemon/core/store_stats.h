// Counters every bounded store reports (command caches, allocation and
// staging pools), summed across stores for status and metrics.
#ifndef HRX_DAEMON_CORE_STORE_STATS_H_
#define HRX_DAEMON_CORE_STORE_STATS_H_

#include <cstdint>

namespace hrx::daemon {

struct StoreStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;       // requests served from the store
  uint64_t misses = 0;     // requests that had to build or allocate
  uint64_t evictions = 0;  // entries dropped to stay within bounds

  StoreStats& operator+=(const StoreStats& other) {
    entries += other.entries;
    bytes += other.bytes;
    hits += other.hits;
    misses += other.misses;
    evictions += other.evictions;
    return *this;
  }
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_STORE_STATS_H_
