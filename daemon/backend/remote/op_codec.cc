#include "daemon/backend/remote/op_codec.h"

#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_format.h"
#include "shared/overloaded.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;

absl::Status Malformed(std::string_view what) {
  return Refusal(
      Reason::kStreamProtocol,
      absl::StrFormat("executor: %s. Fix: report a bug.", std::string(what)));
}

}  // namespace

absl::Status UnknownObject(std::string_view what, uint64_t id) {
  return Malformed(absl::StrFormat("no %s %u", std::string(what), id));
}

absl::StatusOr<backend::GraphRef> LocalObjects::Graph(uint64_t id) const {
  return UnknownObject("graph", id);
}

absl::Status EncodeSpan(const backend::MemoryRef& memory, uint64_t offset,
                        uint64_t length, RemoteNames& names, wire::Span* out) {
  HRX_ASSIGN_OR_RETURN(uint64_t id, names.MemoryId(memory));
  out->set_memory(id);
  out->set_offset(offset);
  out->set_length(length);
  return absl::OkStatus();
}

absl::Status EncodeWrite(const backend::MemoryRef& dst, uint64_t offset,
                         const std::string& bytes, RemoteNames& names,
                         wire::Write* out) {
  HRX_RETURN_IF_ERROR(
      EncodeSpan(dst, offset, bytes.size(), names, out->mutable_dst()));
  out->set_data(bytes);
  return absl::OkStatus();
}

absl::Status EncodeFill(const backend::FillOp& fill, RemoteNames& names,
                        wire::Fill* out) {
  out->set_value(fill.value);
  return EncodeSpan(fill.dst, fill.offset, fill.length, names,
                    out->mutable_dst());
}

absl::Status EncodeCopy(const backend::CopyOp& copy, RemoteNames& names,
                        wire::Copy* out) {
  HRX_RETURN_IF_ERROR(EncodeSpan(copy.dst, copy.dst_offset, copy.length, names,
                                 out->mutable_dst()));
  return EncodeSpan(copy.src, copy.src_offset, copy.length, names,
                    out->mutable_src());
}

absl::Status EncodeDispatch(const backend::DispatchArgs& dispatch,
                            RemoteNames& names, wire::Dispatch* out) {
  HRX_ASSIGN_OR_RETURN(uint64_t kernel, names.KernelId(dispatch.kernel));
  out->set_kernel(kernel);
  for (int d = 0; d < 3; ++d) {
    out->add_grid(dispatch.grid[d]);
    out->add_block(dispatch.block[d]);
  }
  out->set_constants(dispatch.constants);
  for (const backend::BoundBuffer& binding : dispatch.bindings) {
    HRX_RETURN_IF_ERROR(EncodeSpan(binding.memory, binding.offset,
                                   binding.length, names, out->add_bindings()));
  }
  return absl::OkStatus();
}

absl::Status EncodeGraph(const backend::GraphPlan& plan, RemoteNames& names,
                         wire::DefineGraph* out) {
  for (const backend::GraphNode& node : plan.nodes) {
    wire::GraphNode* encoded = out->add_nodes();
    encoded->mutable_after()->Add(node.after.begin(), node.after.end());
    HRX_RETURN_IF_ERROR(std::visit(
        Overloaded{
            [&](const backend::FillOp& fill) {
              return EncodeFill(fill, names, encoded->mutable_fill());
            },
            [&](const backend::CopyOp& copy) {
              return EncodeCopy(copy, names, encoded->mutable_copy());
            },
            [&](const backend::DispatchRef& dispatch) {
              return EncodeDispatch(*dispatch, names,
                                    encoded->mutable_dispatch());
            },
            [&](const backend::JoinOp&) {
              encoded->mutable_join();
              return absl::OkStatus();
            },
        },
        node.op));
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodedSpan> DecodeSpan(const wire::Span& span,
                                       const LocalObjects& objects) {
  HRX_ASSIGN_OR_RETURN(backend::MemoryRef memory,
                       objects.Memory(span.memory()));
  const uint64_t size = memory->size();
  if (span.offset() > size || span.length() > size - span.offset()) {
    return Malformed(
        absl::StrFormat("span at %u of %u bytes past memory %u of %u bytes",
                        span.offset(), span.length(), span.memory(), size));
  }
  return DecodedSpan{std::move(memory), span.offset(), span.length()};
}

absl::StatusOr<DecodedSpan> DecodeWrite(const wire::Write& write,
                                        const LocalObjects& objects) {
  HRX_ASSIGN_OR_RETURN(DecodedSpan dst, DecodeSpan(write.dst(), objects));
  if (dst.length != write.data().size()) {
    return Malformed(absl::StrFormat("a write of %u bytes into a span of %u",
                                     write.data().size(), dst.length));
  }
  return dst;
}

absl::StatusOr<backend::FillOp> DecodeFill(const wire::Fill& fill,
                                           const LocalObjects& objects) {
  HRX_ASSIGN_OR_RETURN(DecodedSpan dst, DecodeSpan(fill.dst(), objects));
  return backend::FillOp{std::move(dst.memory), dst.offset, dst.length,
                         static_cast<uint8_t>(fill.value())};
}

absl::StatusOr<backend::CopyOp> DecodeCopy(const wire::Copy& copy,
                                           const LocalObjects& objects) {
  HRX_ASSIGN_OR_RETURN(DecodedSpan dst, DecodeSpan(copy.dst(), objects));
  HRX_ASSIGN_OR_RETURN(DecodedSpan src, DecodeSpan(copy.src(), objects));
  if (dst.length != src.length) {
    return Malformed(
        absl::StrFormat("copy of %u bytes into %u", src.length, dst.length));
  }
  return backend::CopyOp{std::move(dst.memory), dst.offset,
                         std::move(src.memory), src.offset, dst.length};
}

absl::StatusOr<backend::DispatchRef> DecodeDispatch(
    const wire::Dispatch& dispatch, const LocalObjects& objects, bool cached) {
  if (dispatch.grid_size() != 3 || dispatch.block_size() != 3) {
    return Malformed(absl::StrFormat("a launch of %d x %d dimensions",
                                     dispatch.grid_size(),
                                     dispatch.block_size()));
  }
  auto args = std::make_shared<backend::DispatchArgs>();
  args->cached = cached;
  HRX_ASSIGN_OR_RETURN(args->kernel, objects.Kernel(dispatch.kernel()));
  for (int d = 0; d < 3; ++d) {
    args->grid[d] = dispatch.grid(d);
    args->block[d] = dispatch.block(d);
  }
  args->constants = dispatch.constants();
  args->bindings.reserve(dispatch.bindings_size());
  for (const wire::Span& binding : dispatch.bindings()) {
    HRX_ASSIGN_OR_RETURN(DecodedSpan span, DecodeSpan(binding, objects));
    args->bindings.push_back(
        {std::move(span.memory), span.offset, span.length});
  }
  return backend::DispatchRef(std::move(args));
}

absl::StatusOr<backend::GraphRef> DecodeGraph(const wire::DefineGraph& graph,
                                              const LocalObjects& objects) {
  auto plan = std::make_shared<backend::GraphPlan>();
  plan->nodes.reserve(graph.nodes_size());
  for (const wire::GraphNode& node : graph.nodes()) {
    const uint32_t index = static_cast<uint32_t>(plan->nodes.size());
    backend::GraphNode& out = plan->nodes.emplace_back();
    for (uint32_t before : node.after()) {
      if (before >= index) {
        return Malformed(absl::StrFormat(
            "graph node %u ordered after node %u, not an earlier one", index,
            before));
      }
      out.after.push_back(before);
    }
    switch (node.op_case()) {
      case wire::GraphNode::kFill: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeFill(node.fill(), objects));
        break;
      }
      case wire::GraphNode::kCopy: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeCopy(node.copy(), objects));
        break;
      }
      case wire::GraphNode::kDispatch: {
        HRX_ASSIGN_OR_RETURN(out.op, DecodeDispatch(node.dispatch(), objects));
        break;
      }
      case wire::GraphNode::kJoin:
      case wire::GraphNode::OP_NOT_SET:
        out.op = backend::JoinOp{};
        break;
    }
  }
  return backend::GraphRef(std::move(plan));
}

}  // namespace hrx::backend::remote
