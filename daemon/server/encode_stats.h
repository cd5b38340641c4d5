// Core to wire for statistics: one Encode function per message, used by
// hrxd's services and by an executor answering for the streams it serves
// (so a client reads the same fields whichever process holds the stream).
#ifndef HRX_DAEMON_SERVER_ENCODE_STATS_H_
#define HRX_DAEMON_SERVER_ENCODE_STATS_H_

#include "daemon/core/store_stats.h"
#include "daemon/core/types.h"
#include "hrx/v1/stream.pb.h"

namespace hrx::daemon {

void EncodeCounters(const StoreStats& stats, hrx::v1::CacheCounters* out);
void EncodeStreamStats(const StreamStats& stats,
                       hrx::v1::StreamStatsResponse* out);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_SERVER_ENCODE_STATS_H_
