// Graphs: a recorded DAG of fills, copies, dispatches and joins, checked and
// prepared once into an exec, replayed by each launch as one queue command.
#include <atomic>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "daemon/core/core.h"
#include "daemon/core/planner.h"
#include "daemon/core/session.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

using backend::GraphNode;

absl::Status NodeError(size_t index, size_t count, const std::string& why,
                       const std::string& fix) {
  return Refusal(Reason::kBadGraphNode,absl::StrFormat(
      "graph node %u of %u: %s. Fix: %s", index + 1, count, why,
      fix));
}

// Shape checks that apply to graph nodes but not to stream commands.
absl::Status CheckNodeShape(const GraphNodeSpec& node, size_t index,
                            size_t count) {
  for (uint32_t before : node.after) {
    if (before >= index) {
      return NodeError(index, count,
                       absl::StrFormat("it waits on node %u, which is not an "
                                       "earlier node",
                                       before + 1),
                       "wait only on nodes recorded before this one");
    }
  }
  if (node.op == GraphNodeSpec::Op::kFill && node.fill.dst.length == 0) {
    return NodeError(index, count, "the fill is empty",
                     "record fills of at least one byte");
  }
  if (node.op == GraphNodeSpec::Op::kCopy &&
      (node.copy.dst.length == 0 ||
       node.copy.dst.length != node.copy.src.length)) {
    return NodeError(index, count,
                     absl::StrFormat("the copy's views are %u and %u bytes",
                                     node.copy.dst.length,
                                     node.copy.src.length),
                     "record copies between equal, nonempty views");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GraphExecInfo> Core::CreateGraphExec(uint64_t session,
                                                    uint64_t stream,
                                                    GraphSpec spec) {
  const size_t count = spec.nodes.size();
  if (count > kMaxGraphNodes) {
    return Refusal(Reason::kGraphTooLarge,absl::StrFormat(
        "finish graph: %u nodes, the capacity is %u. Fix: "
        "split the graph.",
        count, kMaxGraphNodes));
  }
  size_t runnable = 0;
  for (size_t i = 0; i < count; ++i) {
    HRX_RETURN_IF_ERROR(CheckNodeShape(spec.nodes[i], i, count));
    if (spec.nodes[i].op != GraphNodeSpec::Op::kJoin) ++runnable;
  }
  if (spec.profiled && spec.labels.size() != runnable) {
    return Refusal(Reason::kLabelMismatch,absl::StrFormat(
        "finish profiled graph: %u labels for %u non-join "
        "nodes. Fix: give one label per fill, copy and dispatch, in order.",
        spec.labels.size(), runnable));
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  if (owner->tenant->role() == hrx::v1::ROLE_OBSERVER) {
    return Refusal(Reason::kObserverReadOnly,absl::StrFormat(
        "finish graph: tenant \"%s\" (%s) has the "
        "observer role, which may only inspect. Fix: run the client as a uid "
        "of a client tenant.",
        owner->tenant->name(), owner->Who()));
  }
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       owner->tenant->Reserve(Resource::kGraphs, 1,
                                              "finish graph", owner->Who()));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "finish graph stream"));
  auto plan = std::make_shared<backend::GraphPlan>();
  plan->nodes.resize(count);
  planner::Planner planner(*owner, **target, count, "graph node",
                           /*use_caches=*/false);
  GraphExecEntry exec;
  exec.stream_id = (*target)->id;
  exec.profiled = spec.profiled;
  size_t next_label = 0;
  absl::flat_hash_set<const backend::Memory*> bound;
  uint64_t binding_bytes = 0;
  auto bind = [&](const backend::MemoryRef& memory) {
    if (memory != nullptr && bound.insert(memory.get()).second) {
      binding_bytes += memory->size();
    }
  };
  for (size_t i = 0; i < count; ++i) {
    GraphNodeSpec& node = spec.nodes[i];
    GraphNode& out = plan->nodes[i];
    out.after = node.after;
    if (node.op == GraphNodeSpec::Op::kJoin) {
      out.op = GraphNode::Op::kJoin;
      exec.labels.emplace_back();
      continue;
    }
    Command command;
    if (node.op == GraphNodeSpec::Op::kFill) {
      command = node.fill;
    } else if (node.op == GraphNodeSpec::Op::kCopy) {
      command = node.copy;
    } else {
      command = std::move(node.dispatch);
    }
    HRX_RETURN_IF_ERROR(planner.Add(i, command));
    exec.labels.push_back(spec.profiled ? spec.labels[next_label++] : "");
  }
  planner::Plan prepared = planner.Take();
  // The planner produced one step per non-join node, in order.
  size_t step = 0;
  for (size_t i = 0; i < count; ++i) {
    GraphNode& out = plan->nodes[i];
    if (spec.nodes[i].op == GraphNodeSpec::Op::kJoin) continue;
    planner::Prepared& made = prepared.steps[step++];
    if (auto* transfer = std::get_if<PreparedTransfer>(&made)) {
      out.op = transfer->src == nullptr ? GraphNode::Op::kFill
                                        : GraphNode::Op::kCopy;
      out.dst = transfer->dst;
      out.dst_offset = transfer->dst_offset;
      out.src = transfer->src;
      out.src_offset = transfer->src_offset;
      out.length = transfer->length;
      out.value = transfer->value;
      bind(out.dst);
      bind(out.src);
    } else {
      out.op = GraphNode::Op::kDispatch;
      out.dispatch = std::get<backend::DispatchRef>(made);
      for (const backend::BoundBuffer& binding : out.dispatch->bindings) {
        bind(binding.memory);
      }
    }
  }
  exec.plan = std::move(plan);
  exec.failed = std::make_shared<std::atomic<bool>>(false);
  exec.charge = std::move(charge);
  const uint64_t handle = owner->graph_execs.Insert(std::move(exec));
  return GraphExecInfo{handle, binding_bytes};
}

absl::Status Core::DestroyGraphExec(uint64_t session, uint64_t exec) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  // Queued launches hold the plan (and so its memory) until they have run;
  // the graph budget is returned now.
  return owner->graph_execs.Remove(exec, "destroy graph exec").status();
}

absl::Status Core::ClearGraphFailure(uint64_t session, uint64_t exec) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, FindSession(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(GraphExecEntry * entry,
                       owner->graph_execs.Find(exec, "clear graph failure"));
  entry->failed->store(false);
  return absl::OkStatus();
}

void Core::LaunchProfiled(
    uint64_t session, uint64_t stream, uint64_t exec,
    std::function<void(absl::StatusOr<std::vector<NodeTime>>)> done) {
  using Profile = absl::StatusOr<std::vector<NodeTime>>;
  auto owner = FindSession(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "launch profiled stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrderLocked(*target, [keep, target, exec, done = std::move(done)](
                                  absl::Status cancelled, Deferred& after) {
      auto fail = [&](absl::Status status) {
        after.push_back([done, status] { done(Profile(status)); });
      };
      if (!cancelled.ok()) return fail(cancelled);
      auto entry = keep->graph_execs.Find(exec, "launch profiled");
      if (!entry.ok()) return fail(entry.status());
      GraphExecEntry& graph = **entry;
      if (!graph.profiled) {
        return fail(Refusal(Reason::kGraphNotProfiled, "launch profiled: the graph was finished "
            "without labels. Fix: finish it with FinishProfiled(labels)."));
      }
      if (graph.stream_id != target->id) {
        return fail(Refusal(Reason::kGraphWrongStream, "launch profiled: the graph was recorded on "
            "another stream and replays only there. Fix: launch it on the "
            "stream that recorded it."));
      }
      if (graph.failed->load()) {
        return fail(Refusal(Reason::kGraphFailed, "launch profiled: an earlier launch of this graph "
            "failed. Fix: clear the failure before launching again."));
      }
      auto times = std::make_shared<std::vector<uint64_t>>(
          graph.plan->nodes.size(), 0);
      backend::Queue* queue = target->queue;
      auto enqueued = queue->EnqueueGraph(graph.plan, times.get());
      if (!enqueued.ok()) return fail(enqueued.status());
      const backend::Fence fence = target->published = *enqueued;
      after.push_back([queue, fence, times, labels = graph.labels,
                       failed = graph.failed, done]() {
        queue->OnComplete(fence, [times, labels, failed,
                                  done](absl::Status status) {
          if (!status.ok()) {
            failed->store(true);
            return done(Profile(status));
          }
          std::vector<NodeTime> profile;
          for (size_t i = 0; i < labels.size(); ++i) {
            if (!labels[i].empty()) profile.push_back({labels[i], (*times)[i]});
          }
          done(std::move(profile));
        });
      });
    }, after);
  }
  RunDeferred(after);
}

}  // namespace hrx::daemon
