#include "daemon/core/planner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx::daemon::planner {
namespace {

using backend::DispatchRef;

void AppendU64(std::string& key, uint64_t value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendView(std::string& key, const ViewRef& view) {
  AppendU64(key, view.buffer);
  AppendU64(key, view.offset);
  AppendU64(key, view.length);
}

}  // namespace

absl::StatusOr<ResolvedView> Resolve(Session& session, const ViewRef& view,
                                     std::string_view what) {
  HRX_ASSIGN_OR_RETURN(BufferEntry * buffer,
                       session.buffers.Find(view.buffer, what));
  HRX_RETURN_IF_ERROR(shared::CheckSpan(what, view.offset, view.length,
                                        buffer->memory->size()));
  return ResolvedView{buffer->memory, view.offset, view.length,
                      buffer->origin_stream};
}

absl::Status CheckLaunchable(const GraphExecEntry& exec,
                             const StreamEntry& stream, std::string_view what) {
  if (exec.stream_id != stream.id) {
    return Refusal(
        Reason::kGraphWrongStream,
        absl::StrFormat("%s: the graph was recorded on another stream and "
                        "replays only there. Fix: launch it on the stream "
                        "that recorded it.",
                        std::string(what)));
  }
  if (exec.failed->load()) {
    return Refusal(
        Reason::kGraphFailed,
        absl::StrFormat("%s: an earlier launch of this graph failed. Fix: "
                        "find why (the failing launch's sync reported it), "
                        "then clear the failure before launching again.",
                        std::string(what)));
  }
  return absl::OkStatus();
}

std::string Planner::Label(size_t i, std::string_view op,
                           std::string_view part) const {
  return absl::StrFormat("%s %u of %u (%s%s%s)", noun_, i + 1, count_,
                         std::string(op), part.empty() ? "" : " ",
                         std::string(part));
}

absl::Status Planner::Add(size_t i, Command& command) {
  return std::visit([&](auto& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                        session_.mu) { return Add(i, c); },
                    command);
}

absl::Status Planner::Add(size_t i, FillCommand& fill) {
  std::string key = "F";
  AppendView(key, fill.dst);
  key.push_back(static_cast<char>(fill.value));
  if (const CachedTransfer* hit =
          use_caches_ ? stream_.transfer_cache.Find(key) : nullptr) {
    std::visit([&](const auto& op) { plan_.steps.push_back(op); }, *hit);
    return absl::OkStatus();
  }
  HRX_ASSIGN_OR_RETURN(ResolvedView dst,
                       Resolve(session_, fill.dst, Label(i, "fill", "dst")));
  backend::FillOp prepared{dst.memory, dst.offset, dst.length, fill.value};
  if (use_caches_ && dst.origin_stream == stream_.id && dst.length != 0) {
    stream_.transfer_cache.Insert(std::move(key), prepared,
                                  sizeof(CachedTransfer), {dst.memory->id()});
  }
  plan_.steps.push_back(std::move(prepared));
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, CopyCommand& copy) {
  std::string key = "C";
  AppendView(key, copy.dst);
  AppendView(key, copy.src);
  if (const CachedTransfer* hit =
          use_caches_ ? stream_.transfer_cache.Find(key) : nullptr) {
    std::visit([&](const auto& op) { plan_.steps.push_back(op); }, *hit);
    return absl::OkStatus();
  }
  HRX_ASSIGN_OR_RETURN(ResolvedView dst,
                       Resolve(session_, copy.dst, Label(i, "copy", "dst")));
  HRX_ASSIGN_OR_RETURN(ResolvedView src,
                       Resolve(session_, copy.src, Label(i, "copy", "src")));
  if (dst.length != src.length) {
    return Refusal(
        Reason::kCopyLengthMismatch,
        absl::StrFormat("%s: dst is %u bytes but src is %u bytes. "
                        "Fix: copy between views of equal length.",
                        Label(i, "copy", ""), dst.length, src.length));
  }
  if (dst.memory == src.memory &&
      shared::SpansOverlap(dst.offset, src.offset, dst.length)) {
    return Refusal(
        Reason::kCopyOverlap,
        absl::StrFormat("%s: dst [%u, +%u) overlaps src [%u, +%u) in the "
                        "same buffer. Fix: copy through a temporary buffer.",
                        Label(i, "copy", ""), dst.offset, dst.length,
                        src.offset, src.length));
  }
  backend::CopyOp prepared{dst.memory, dst.offset, src.memory, src.offset,
                           dst.length};
  if (use_caches_ && dst.origin_stream == stream_.id &&
      src.origin_stream == stream_.id && dst.length != 0) {
    stream_.transfer_cache.Insert(std::move(key), prepared,
                                  sizeof(CachedTransfer),
                                  {dst.memory->id(), src.memory->id()});
  }
  plan_.steps.push_back(std::move(prepared));
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, UploadCommand& upload) {
  const std::string label = Label(i, "upload", "dst");
  HRX_ASSIGN_OR_RETURN(ResolvedView dst, Resolve(session_, upload.dst, label));
  if (upload.data.size() > dst.length) {
    return Refusal(
        Reason::kUploadTooLarge,
        absl::StrFormat("%s: %u bytes of data do not fit the %u-byte "
                        "view. Fix: upload at most the view's length.",
                        label, upload.data.size(), dst.length));
  }
  plan_.steps.push_back(
      PreparedUpload{dst.memory, dst.offset, std::move(upload.data)});
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, RecordEventCommand& record) {
  if (record.event == 0 || session_.events.contains(record.event) ||
      !batch_events_.insert(record.event).second) {
    return Refusal(
        Reason::kEventIdInUse,
        absl::StrFormat(
            "%s: event id %u is zero or already names a live "
            "event of this session. Fix: use a fresh nonzero id per event and "
            "release events when done.",
            Label(i, "record_event", ""), record.event));
  }
  if (session_.events.size() + batch_events_.size() > kMaxEventsPerSession) {
    return Refusal(
        Reason::kTooManyEvents,
        absl::StrFormat("%s: the session holds %u live events, the limit "
                        "is %u. Fix: release events that are no longer needed.",
                        Label(i, "record_event", ""), session_.events.size(),
                        kMaxEventsPerSession));
  }
  // Live event ids are counted per tenant (each holds a table entry).
  HRX_ASSIGN_OR_RETURN(
      ChargeRef charge,
      session_.tenant->Reserve(Resource::kEvents, 1,
                               Label(i, "record_event", ""), session_.Who()));
  plan_.recorded_events.push_back(record.event);
  plan_.event_charges.push_back(std::move(charge));
  plan_.steps.push_back(PreparedRecord{record.event});
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, WaitEventCommand& wait) {
  if (batch_events_.contains(wait.event)) {
    plan_.steps.push_back(PreparedWait{});  // recorded on this stream
    return absl::OkStatus();
  }
  auto it = session_.events.find(wait.event);
  if (it == session_.events.end()) {
    return Refusal(
        Reason::kUnknownEvent,
        absl::StrFormat(
            "%s: event %u is not a live event of this session. "
            "Fix: wait on events this session recorded and has not released.",
            Label(i, "wait_event", ""), wait.event));
  }
  if (it->second.queue == nullptr) {
    return Refusal(
        Reason::kEventUnpublished,
        absl::StrFormat(
            "%s: event %u belongs to a batch that is still "
            "being enqueued. Fix: synchronize the recording stream first.",
            Label(i, "wait_event", ""), wait.event));
  }
  const bool same_queue = it->second.queue == stream_.queue;
  plan_.steps.push_back(same_queue
                            ? PreparedWait{}
                            : PreparedWait{it->second.queue, it->second.fence});
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, DispatchCommand& dispatch) {
  std::string key = "D";
  AppendU64(key, dispatch.kernel);
  for (int d = 0; d < 3; ++d) {
    AppendU64(key, (uint64_t{dispatch.grid[d]} << 32) | dispatch.block[d]);
  }
  AppendU64(key, dispatch.constants.size());
  key += dispatch.constants;
  for (const ViewRef& view : dispatch.bindings) AppendView(key, view);
  if (const DispatchRef* hit =
          use_caches_ ? stream_.dispatch_cache.Find(key) : nullptr) {
    plan_.steps.push_back(*hit);
    return absl::OkStatus();
  }
  const std::string label = Label(i, "dispatch", "");
  HRX_ASSIGN_OR_RETURN(KernelEntry * entry,
                       session_.kernels.Find(dispatch.kernel, label));
  const backend::KernelRef& kernel = entry->kernel;
  const backend::KernelSignature& signature = kernel->signature();
  HRX_RETURN_IF_ERROR(shared::CheckLaunchShape(
      label, dispatch.grid, dispatch.block, signature.workgroup_size));
  HRX_RETURN_IF_ERROR(shared::CheckArguments(
      label, signature, dispatch.constants.size(), dispatch.bindings.size()));
  auto args = std::make_shared<backend::DispatchArgs>();
  args->kernel = kernel;
  args->grid = dispatch.grid;
  args->block = dispatch.block;
  args->constants = dispatch.constants;
  bool cacheable = true;
  std::vector<uint64_t> ids;
  for (size_t b = 0; b < dispatch.bindings.size(); ++b) {
    HRX_ASSIGN_OR_RETURN(
        ResolvedView view,
        Resolve(session_, dispatch.bindings[b],
                Label(i, "dispatch", absl::StrCat("binding ", b))));
    cacheable = cacheable && view.origin_stream == stream_.id;
    ids.push_back(view.memory->id());
    args->bindings.push_back({view.memory, view.offset, view.length});
  }
  args->cached = use_caches_ && cacheable;
  DispatchRef prepared = std::move(args);
  if (prepared->cached) {
    const uint64_t bytes =
        prepared->constants.size() +
        prepared->bindings.size() * sizeof(backend::BoundBuffer);
    stream_.dispatch_cache.Insert(std::move(key), prepared, bytes,
                                  std::move(ids));
  }
  plan_.steps.push_back(std::move(prepared));
  return absl::OkStatus();
}

absl::Status Planner::Add(size_t i, LaunchGraphCommand& launch) {
  const std::string label = Label(i, "launch_graph", "");
  HRX_ASSIGN_OR_RETURN(GraphExecEntry * exec,
                       session_.graph_execs.Find(launch.exec, label));
  HRX_RETURN_IF_ERROR(CheckLaunchable(*exec, stream_, label));
  plan_.steps.push_back(PreparedLaunch{exec->plan, exec->failed});
  return absl::OkStatus();
}

}  // namespace hrx::daemon::planner
