#include "daemon/server/core_stream_engine.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace hrx::daemon {

absl::Status CoreStreamEngine::SessionStatus() {
  return units_.sessions.Find(caller_.session()).status();
}

void CoreStreamEngine::CountRefusal(const absl::Status& refusal) {
  units_.refusals.Count(refusal);
}

absl::StatusOr<uint64_t> CoreStreamEngine::OpenStream(
    hrx::v1::CreateStreamResponse* opened) {
  auto stream = units_.commands.CreateStream(caller_.session());
  if (!stream.ok()) return stream.status();
  caller_.Seal(stream->handle, opened->mutable_stream());
  opened->set_queue(stream->queue);
  return stream->handle;
}

void CoreStreamEngine::DestroyStream(uint64_t stream, StreamDone done) {
  units_.commands.DestroyStream(caller_.session(), stream, std::move(done));
}

void CoreStreamEngine::DeferRefusal(uint64_t stream, absl::Status refusal) {
  units_.commands.DeferRefusal(caller_.session(), stream, std::move(refusal));
}

void CoreStreamEngine::Submit(
    uint64_t stream,
    const google::protobuf::RepeatedPtrField<hrx::v1::Command>& commands,
    BatchDone done) {
  auto decoded = caller_.Commands(commands);
  if (!decoded.ok()) {
    // Kept for the next sync point, as a refusal of the core's own is.
    DeferRefusal(stream, decoded.status());
    done(size_t{0});
    return;
  }
  units_.commands.Submit(caller_.session(), stream, *std::move(decoded),
                         SubmitErrors::kDefer, std::move(done));
}

void CoreStreamEngine::Synchronize(uint64_t stream, StreamDone done) {
  units_.commands.Synchronize(caller_.session(), stream, std::move(done));
}

absl::StatusOr<StreamRead> CoreStreamEngine::PrepareRead(
    const hrx::v1::View& src) {
  auto view = caller_.View(src, "read src");
  if (!view.ok()) return view.status();
  auto hold =
      units_.commands.ReserveReplyBytes(caller_.session(), view->length);
  if (!hold.ok()) return hold.status();
  StreamRead read;
  read.buffer = view->buffer;
  read.offset = view->offset;
  read.length = view->length;
  read.reply_bytes = std::min(view->length, kMaxInlineReadBytes);
  read.hold = *std::move(hold);
  return read;
}

void CoreStreamEngine::Read(uint64_t stream, const StreamRead& read,
                            std::string* out, StreamDone done) {
  units_.commands.Read(caller_.session(), stream,
                       ViewRef{read.buffer, read.offset, read.length}, out,
                       std::move(done));
}

absl::StatusOr<bool> CoreStreamEngine::Poll(uint64_t stream) {
  return units_.commands.Poll(caller_.session(), stream);
}

void CoreStreamEngine::LaunchProfiled(uint64_t stream,
                                      const hrx::v1::Handle& exec,
                                      hrx::v1::Profile* profile,
                                      StreamDone done) {
  auto object =
      caller_.Object(exec, shared::HandleKind::kGraphExec, "launch profiled");
  if (!object.ok()) {
    done(object.status());
    return;
  }
  units_.graphs.LaunchProfiled(
      caller_.session(), stream, *object,
      [profile,
       done = std::move(done)](absl::StatusOr<std::vector<NodeTime>> nodes) {
        if (!nodes.ok()) {
          done(nodes.status());
          return;
        }
        for (const NodeTime& node : *nodes) {
          hrx::v1::ProfiledNode* wire = profile->add_nodes();
          wire->set_label(node.label);
          wire->set_nanoseconds(node.nanoseconds);
        }
        done(absl::OkStatus());
      });
}

bool CoreStreamEngine::Progress(uint64_t stream) {
  if (stream != polled_stream_) {
    auto queue = units_.commands.StreamQueue(caller_.session(), stream);
    polled_stream_ = stream;
    // A stream already gone has nothing left to help along, and a queue
    // whose completions arrive by themselves needs no help.
    polled_queue_ =
        queue.ok() && (*queue)->NeedsPoll() ? *std::move(queue) : nullptr;
  }
  return polled_queue_ != nullptr && polled_queue_->Poll();
}

}  // namespace hrx::daemon
