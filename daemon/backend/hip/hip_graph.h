// GraphPlans as native HIP graphs, and single graph nodes issued directly
// on a stream (for profiled replays, which time each node).
#ifndef HRX_DAEMON_BACKEND_HIP_HIP_GRAPH_H_
#define HRX_DAEMON_BACKEND_HIP_HIP_GRAPH_H_

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/hip/hip_platform.h"

namespace hrx::backend {

// Builds `plan` as a hipGraph (fills as memset nodes, copies as memcpy
// nodes, dispatches as kernel nodes, joins as empty nodes, with the plan's
// edges) and instantiates it. The caller owns the executable.
absl::StatusOr<hipGraphExec_t> InstantiateGraph(const GraphPlan& plan);

// Enqueues the work of one node on `stream` (joins enqueue nothing).
absl::Status IssueNode(const GraphNode& node, hipStream_t stream);

// Enqueues one dispatch on `stream`.
absl::Status IssueDispatch(const DispatchArgs& dispatch, hipStream_t stream);

// Enqueues a fill or a copy on `stream` (nothing for zero bytes).
absl::Status IssueFill(const Memory& dst, uint64_t offset, uint64_t length,
                       uint8_t value, hipStream_t stream);
absl::Status IssueCopy(const Memory& dst, uint64_t dst_offset,
                       const Memory& src, uint64_t src_offset, uint64_t length,
                       hipStream_t stream);

}  // namespace hrx::backend

#endif  // HRX_DAEMON_BACKEND_HIP_HIP_GRAPH_H_
