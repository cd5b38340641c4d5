// A bounded cache of prepared commands, one per stream: at most
// `max_entries` entries and `max_bytes` of prepared storage, evicting the
// oldest first. An entry names the allocations it binds; EvictMemory drops
// every entry that binds one, as soon as its buffer is freed, so a cache never
// keeps freed memory alive. Counts hits, misses and evictions.
//
// Thread-compatible: the owning session's lock guards it.
#ifndef HRX_DAEMON_CORE_COMMAND_CACHE_H_
#define HRX_DAEMON_CORE_COMMAND_CACHE_H_

#include <cstdint>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/core/store_stats.h"

namespace hrx::daemon {

using CacheStats = StoreStats;

template <typename Value>
class CommandCache {
 public:
  CommandCache(size_t max_entries, uint64_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The cached value for `key`, counting a hit or a miss; nullptr on a miss.
  const Value* Find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    return &it->second->value;
  }

  // Inserts a value after a miss. A value larger than the whole cache is not
  // kept. `memory_ids` are the allocations it binds.
  void Insert(std::string key, Value value, uint64_t bytes,
              std::vector<uint64_t> memory_ids) {
    if (bytes > max_bytes_ || max_entries_ == 0 || index_.contains(key)) return;
    while (entries_.size() >= max_entries_ ||
           stats_.bytes + bytes > max_bytes_) {
      Erase(entries_.begin());
      ++stats_.evictions;
    }
    entries_.push_back(
        Entry{key, std::move(value), bytes, std::move(memory_ids)});
    index_.emplace(std::move(key), std::prev(entries_.end()));
    stats_.bytes += bytes;
  }

  // Drops every entry that binds allocation `memory_id`.
  void EvictMemory(uint64_t memory_id) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      for (uint64_t id : it->memory_ids) {
        if (id == memory_id) {
          Erase(it);
          ++stats_.evictions;
          break;
        }
      }
      it = next;
    }
  }

  // Drops every entry whose value satisfies `predicate`.
  template <typename Predicate>
  void EvictIf(Predicate predicate) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (predicate(it->value)) {
        Erase(it);
        ++stats_.evictions;
      }
      it = next;
    }
  }

  size_t size() const { return entries_.size(); }
  CacheStats stats() const {
    CacheStats stats = stats_;
    stats.entries = entries_.size();
    return stats;
  }

 private:
  struct Entry {
    std::string key;
    Value value;
    uint64_t bytes;
    std::vector<uint64_t> memory_ids;
  };
  using Iterator = typename std::list<Entry>::iterator;

  void Erase(Iterator it) {
    stats_.bytes -= it->bytes;
    index_.erase(it->key);
    entries_.erase(it);
  }

  const size_t max_entries_;
  const uint64_t max_bytes_;
  std::list<Entry> entries_;  // oldest first
  absl::flat_hash_map<std::string, Iterator> index_;
  CacheStats stats_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_COMMAND_CACHE_H_
