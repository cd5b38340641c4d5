#include "daemon/backend/hip/hip_graph.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/backend/hip/hip_kernel.h"
#include "daemon/backend/hip/hip_memory.h"
#include "daemon/backend/hip/hip_status.h"
#include "shared/overloaded.h"

namespace hrx::backend {
namespace {

constexpr char kHealthFix[] = "check the GPU's health (hrxctl status)";

const HipKernel& KernelOf(const DispatchArgs& dispatch) {
  return static_cast<const HipKernel&>(*dispatch.kernel);
}

dim3 Dim(const std::array<uint32_t, 3>& size) {
  return dim3(size[0], size[1], size[2]);
}

absl::Status AddEmptyNode(hipGraph_t graph,
                          const std::vector<hipGraphNode_t>& deps,
                          hipGraphNode_t* added) {
  return HipStatus(hipGraphAddEmptyNode(added, graph, deps.data(), deps.size()),
                   "build a graph", "hipGraphAddEmptyNode", kHealthFix);
}

absl::Status AddNode(hipGraph_t graph, const GraphNode& node,
                     const std::vector<hipGraphNode_t>& deps,
                     hipGraphNode_t* added) {
  return std::visit(
      Overloaded{
          [&](const FillOp& fill) {
            if (fill.length == 0) return AddEmptyNode(graph, deps, added);
            hipMemsetParams params{};
            params.dst = DeviceAddress(*fill.dst, fill.offset);
            params.elementSize = 1;
            params.width = fill.length;
            params.height = 1;
            params.value = fill.value;
            return HipStatus(hipGraphAddMemsetNode(added, graph, deps.data(),
                                                   deps.size(), &params),
                             "build a graph", "hipGraphAddMemsetNode",
                             kHealthFix);
          },
          [&](const CopyOp& copy) {
            if (copy.length == 0) return AddEmptyNode(graph, deps, added);
            return HipStatus(hipGraphAddMemcpyNode1D(
                                 added, graph, deps.data(), deps.size(),
                                 DeviceAddress(*copy.dst, copy.dst_offset),
                                 DeviceAddress(*copy.src, copy.src_offset),
                                 copy.length, hipMemcpyDefault),
                             "build a graph", "hipGraphAddMemcpyNode1D",
                             kHealthFix);
          },
          [&](const DispatchRef& dispatch) {
            const HipKernel& kernel = KernelOf(*dispatch);
            std::shared_ptr<const PackedParams> packed =
                kernel.PackedFor(*dispatch);
            hipKernelNodeParams params{};
            params.func = reinterpret_cast<void*>(kernel.function());
            params.gridDim = Dim(dispatch->grid);
            params.blockDim = Dim(dispatch->block);
            // Read only: the runtime copies the parameters into the node.
            params.kernelParams = const_cast<void**>(packed->pointers.data());
            // The runtime copies the parameters into the node.
            return HipStatus(
                hipGraphAddKernelNode(added, graph, deps.data(), deps.size(),
                                      &params),
                absl::StrCat("build a graph node for ", kernel.entry()),
                "hipGraphAddKernelNode", kHealthFix);
          },
          [&](const JoinOp&) { return AddEmptyNode(graph, deps, added); },
      },
      node.op);
}

}  // namespace

absl::StatusOr<hipGraphExec_t> InstantiateGraph(const GraphPlan& plan) {
  hipGraph_t graph = nullptr;
  HRX_HIP_RETURN_IF_ERROR(hipGraphCreate(&graph, 0), "build a graph",
                          "hipGraphCreate", kHealthFix);
  std::vector<hipGraphNode_t> nodes(plan.nodes.size(), nullptr);
  absl::Status built;
  std::vector<hipGraphNode_t> deps;
  for (size_t i = 0; i < plan.nodes.size() && built.ok(); ++i) {
    deps.clear();
    for (uint32_t before : plan.nodes[i].after) deps.push_back(nodes[before]);
    built = AddNode(graph, plan.nodes[i], deps, &nodes[i]);
  }
  hipGraphExec_t exec = nullptr;
  if (built.ok()) {
    built = HipStatus(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0),
                      "instantiate a graph", "hipGraphInstantiate", kHealthFix);
  }
  // The executable does not need the graph it was made from.
  (void)hipGraphDestroy(graph);
  if (!built.ok()) return built;
  return exec;
}

absl::Status IssueDispatch(const DispatchArgs& dispatch, hipStream_t stream) {
  const HipKernel& kernel = KernelOf(dispatch);
  std::shared_ptr<const PackedParams> packed = kernel.PackedFor(dispatch);
  // Read only: the runtime copies the parameters at launch.
  return HipStatus(hipModuleLaunchKernel(
                       kernel.function(), dispatch.grid[0], dispatch.grid[1],
                       dispatch.grid[2], dispatch.block[0], dispatch.block[1],
                       dispatch.block[2], 0, stream,
                       const_cast<void**>(packed->pointers.data()), nullptr),
                   absl::StrCat("launch ", kernel.entry()),
                   "hipModuleLaunchKernel",
                   "check the launch shape against the GPU's limits");
}

absl::Status IssueNode(const GraphNode& node, hipStream_t stream) {
  return std::visit(Overloaded{
                        [&](const FillOp& fill) {
                          return IssueFill(*fill.dst, fill.offset, fill.length,
                                           fill.value, stream);
                        },
                        [&](const CopyOp& copy) {
                          return IssueCopy(*copy.dst, copy.dst_offset,
                                           *copy.src, copy.src_offset,
                                           copy.length, stream);
                        },
                        [&](const DispatchRef& dispatch) {
                          return IssueDispatch(*dispatch, stream);
                        },
                        [](const JoinOp&) { return absl::OkStatus(); },
                    },
                    node.op);
}

absl::Status IssueFill(const Memory& dst, uint64_t offset, uint64_t length,
                       uint8_t value, hipStream_t stream) {
  if (length == 0) return absl::OkStatus();
  return HipStatus(
      hipMemsetD8Async(DeviceAddress(dst, offset), value, length, stream),
      "fill", "hipMemsetD8Async", kHealthFix);
}

absl::Status IssueCopy(const Memory& dst, uint64_t dst_offset,
                       const Memory& src, uint64_t src_offset, uint64_t length,
                       hipStream_t stream) {
  if (length == 0) return absl::OkStatus();
  return HipStatus(hipMemcpyAsync(DeviceAddress(dst, dst_offset),
                                  DeviceAddress(src, src_offset), length,
                                  hipMemcpyDefault, stream),
                   "copy", "hipMemcpyAsync", kHealthFix);
}

}  // namespace hrx::backend
