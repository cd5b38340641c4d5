#include "daemon/core/graphs.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "daemon/core/planner.h"
#include "daemon/core/stream_gate.h"
#include "shared/overloaded.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using backend::GraphNode;

absl::Status NodeError(size_t index, size_t count, const std::string& why,
                       const std::string& fix) {
  return Refusal(Reason::kBadGraphNode,
                 absl::StrFormat("graph node %u of %u: %s. Fix: %s", index + 1,
                                 count, why, fix));
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
  if (const auto* fill = std::get_if<FillCommand>(&node.op);
      fill != nullptr && fill->dst.length == 0) {
    return NodeError(index, count, "the fill is empty",
                     "record fills of at least one byte");
  }
  if (const auto* copy = std::get_if<CopyCommand>(&node.op);
      copy != nullptr &&
      (copy->dst.length == 0 || copy->dst.length != copy->src.length)) {
    return NodeError(index, count,
                     absl::StrFormat("the copy's views are %u and %u bytes",
                                     copy->dst.length, copy->src.length),
                     "record copies between equal, nonempty views");
  }
  return absl::OkStatus();
}

bool IsJoin(const GraphNodeSpec& node) {
  return std::holds_alternative<JoinCommand>(node.op);
}

// The backend operation a prepared fill, copy or dispatch node runs.
decltype(GraphNode::op) NodeOp(planner::Prepared& prepared) {
  if (auto* fill = std::get_if<backend::FillOp>(&prepared)) return *fill;
  if (auto* copy = std::get_if<backend::CopyOp>(&prepared)) return *copy;
  return std::get<backend::DispatchRef>(prepared);
}

// Distinct allocations an exec binds, each counted once.
uint64_t BindingBytes(const backend::GraphPlan& plan) {
  absl::flat_hash_set<const backend::Memory*> bound;
  uint64_t bytes = 0;
  auto bind = [&](const backend::MemoryRef& memory) {
    if (memory != nullptr && bound.insert(memory.get()).second) {
      bytes += memory->size();
    }
  };
  for (const GraphNode& node : plan.nodes) {
    std::visit(
        Overloaded{
            [&](const backend::FillOp& fill) { bind(fill.dst); },
            [&](const backend::CopyOp& copy) {
              bind(copy.dst);
              bind(copy.src);
            },
            [&](const backend::DispatchRef& dispatch) {
              for (const backend::BoundBuffer& binding : dispatch->bindings) {
                bind(binding.memory);
              }
            },
            [](const backend::JoinOp&) {},
        },
        node.op);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<GraphExecInfo> Graphs::CreateExec(uint64_t session,
                                                 uint64_t stream,
                                                 GraphSpec spec) {
  const size_t count = spec.nodes.size();
  if (count > kMaxGraphNodes) {
    return Refusal(Reason::kGraphTooLarge,
                   absl::StrFormat("finish graph: %u nodes, the capacity is "
                                   "%u. Fix: split the graph.",
                                   count, kMaxGraphNodes));
  }
  size_t runnable = 0;
  for (size_t i = 0; i < count; ++i) {
    HRX_RETURN_IF_ERROR(CheckNodeShape(spec.nodes[i], i, count));
    if (!IsJoin(spec.nodes[i])) ++runnable;
  }
  if (spec.profiled && spec.labels.size() != runnable) {
    return Refusal(
        Reason::kLabelMismatch,
        absl::StrFormat("finish profiled graph: %u labels for %u non-join "
                        "nodes. Fix: give one label per fill, copy and "
                        "dispatch, in order.",
                        spec.labels.size(), runnable));
  }
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  HRX_RETURN_IF_ERROR(RequireWriter(*owner, "finish graph"));
  HRX_ASSIGN_OR_RETURN(ChargeRef charge,
                       owner->tenant->Reserve(Resource::kGraphs, 1,
                                              "finish graph", owner->Who()));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<StreamEntry> * target,
                       owner->streams.Find(stream, "finish graph stream"));
  planner::Planner planner(*owner, **target, count, "graph node",
                           /*use_caches=*/false);
  planner.AssertSessionLocked();
  for (size_t i = 0; i < count; ++i) {
    HRX_RETURN_IF_ERROR(
        std::visit(Overloaded{
                       [&](JoinCommand&) { return absl::OkStatus(); },
                       [&](auto& op) {
                         planner.AssertSessionLocked();  // the lambda's own
                         return planner.Add(i, op);
                       },
                   },
                   spec.nodes[i].op));
  }
  planner::Plan prepared = planner.Take();
  // The planner made one step per non-join node, in order.
  auto plan = std::make_shared<backend::GraphPlan>();
  plan->nodes.resize(count);
  GraphExecEntry exec;
  size_t step = 0;
  size_t next_label = 0;
  for (size_t i = 0; i < count; ++i) {
    GraphNode& out = plan->nodes[i];
    out.after = std::move(spec.nodes[i].after);
    if (IsJoin(spec.nodes[i])) {
      out.op = backend::JoinOp{};
      exec.labels.emplace_back();
      continue;
    }
    out.op = NodeOp(prepared.steps[step++]);
    exec.labels.push_back(spec.profiled ? spec.labels[next_label++] : "");
  }
  const uint64_t binding_bytes = BindingBytes(*plan);
  exec.plan = std::move(plan);
  exec.stream_id = (*target)->id;
  exec.profiled = spec.profiled;
  exec.failed = std::make_shared<std::atomic<bool>>(false);
  exec.charge = std::move(charge);
  const uint64_t handle = owner->graph_execs.Insert(std::move(exec));
  return GraphExecInfo{handle, binding_bytes};
}

absl::Status Graphs::DestroyExec(uint64_t session, uint64_t exec) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  {
    absl::MutexLock lock(&owner->mu);
    // Queued launches hold the plan (and so its memory) until they have
    // run; the graph budget is returned now.
    HRX_RETURN_IF_ERROR(
        owner->graph_execs.Remove(exec, "destroy graph exec").status());
  }
  sessions_.mirrors().Revoke(session, exec);
  return absl::OkStatus();
}

absl::StatusOr<GraphExecEntry> Graphs::Describe(uint64_t session, uint64_t exec,
                                                std::string_view what) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  absl::MutexLock lock(&owner->mu);
  HRX_ASSIGN_OR_RETURN(GraphExecEntry * entry,
                       owner->graph_execs.Find(exec, what));
  GraphExecEntry copy;
  copy.plan = entry->plan;
  copy.stream_id = entry->stream_id;
  copy.profiled = entry->profiled;
  copy.labels = entry->labels;
  return copy;
}

absl::Status Graphs::ClearFailure(uint64_t session, uint64_t exec) {
  HRX_ASSIGN_OR_RETURN(std::shared_ptr<Session> owner, sessions_.Find(session));
  {
    absl::MutexLock lock(&owner->mu);
    HRX_ASSIGN_OR_RETURN(GraphExecEntry * entry,
                         owner->graph_execs.Find(exec, "clear graph failure"));
    entry->failed->store(false);
  }
  // A copy elsewhere (an executor's, which its launches there marked) is
  // dropped; the next launch there installs it afresh, cleared.
  sessions_.mirrors().Revoke(session, exec);
  return absl::OkStatus();
}

void Graphs::LaunchProfiled(uint64_t session, uint64_t stream, uint64_t exec,
                            ProfileDone done) {
  using Profile = absl::StatusOr<std::vector<NodeTime>>;
  auto owner = sessions_.Find(session);
  if (!owner.ok()) return done(owner.status());
  std::shared_ptr<Session> keep = *owner;
  Deferred after;
  {
    absl::MutexLock lock(&keep->mu);
    auto found = keep->streams.Find(stream, "launch profiled stream");
    if (!found.ok()) return done(found.status());
    std::shared_ptr<StreamEntry> target = **found;
    RunInOrder(
        *target,
        [keep, target, exec, done = std::move(done)](absl::Status cancelled,
                                                     Deferred& after) {
          keep->mu.AssertHeld();  // gated operations run locked
          auto fail = [&](absl::Status status) {
            Report(after, done, Profile(std::move(status)));
          };
          if (!cancelled.ok()) return fail(cancelled);
          // A sync point: a deferred refusal is reported first.
          if (absl::Status deferred = TakeDeferredRefusal(*target);
              !deferred.ok()) {
            return fail(deferred);
          }
          auto entry = keep->graph_execs.Find(exec, "launch profiled");
          if (!entry.ok()) return fail(entry.status());
          GraphExecEntry& graph = **entry;
          if (!graph.profiled) {
            return fail(
                Refusal(Reason::kGraphNotProfiled,
                        "launch profiled: the graph was finished without "
                        "labels. Fix: finish it with "
                        "FinishProfiled(labels)."));
          }
          if (absl::Status launchable =
                  planner::CheckLaunchable(graph, *target, "launch profiled");
              !launchable.ok()) {
            return fail(launchable);
          }
          auto times = std::make_shared<std::vector<uint64_t>>(
              graph.plan->nodes.size(), 0);
          std::shared_ptr<backend::Queue> queue = target->queue;
          auto enqueued = queue->EnqueueGraph(graph.plan, times.get());
          if (!enqueued.ok()) return fail(enqueued.status());
          const backend::Fence fence = target->published = *enqueued;
          after.push_back([queue, fence, times, labels = graph.labels,
                           failed = graph.failed, done]() {
            queue->OnComplete(
                fence, [times, labels, failed, done](absl::Status status) {
                  if (!status.ok()) {
                    failed->store(true);
                    return done(Profile(status));
                  }
                  std::vector<NodeTime> profile;
                  for (size_t i = 0; i < labels.size(); ++i) {
                    if (!labels[i].empty())
                      profile.push_back({labels[i], (*times)[i]});
                  }
                  done(std::move(profile));
                });
          });
        },
        after);
  }
  RunDeferred(after);
}

}  // namespace hrx::daemon
