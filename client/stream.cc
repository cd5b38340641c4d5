#include "hrx/stream.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/internal/event_state.h"
#include "client/internal/stream_state.h"
#include "shared/kernel_signature.h"
#include "shared/launch_check.h"
#include "shared/refusal.h"
#include "shared/span_check.h"
#include "shared/status_macros.h"

namespace hrx {
namespace {

shared::KernelSignature SignatureOf(const Kernel& kernel) {
  shared::KernelSignature signature;
  for (const KernelArgument& arg : kernel.layout()) {
    signature.args.push_back(
        {static_cast<shared::ArgKind>(arg.kind), arg.size});
  }
  signature.workgroup_size = kernel.info().workgroup_size;
  return signature;
}

CacheCounters Counters(const hrx::v1::CacheCounters& wire) {
  return CacheCounters{wire.entries(), wire.bytes(), wire.hits(), wire.misses(),
                       wire.evictions()};
}

}  // namespace

Stream::Stream(std::shared_ptr<client::internal::StreamState> state)
    : state_(std::move(state)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

const Handle& Stream::handle() const { return state_->handle(); }
uint32_t Stream::queue() const { return state_->queue(); }

absl::Status Stream::CheckOwned(const View& view, const char* what) const {
  return CheckOwned(state_->connection().brand(), view, what);
}

absl::Status Stream::CheckOwned(uint64_t brand, const View& view,
                                const char* what) {
  if (view.brand() != brand) {
    return Refusal(
        Reason::kForeignView,
        absl::StrFormat(
            "%s: the view's buffer belongs to another client "
            "session than this stream's. Fix: use buffers allocated through a "
            "stream of the same hrx::Client.",
            what));
  }
  return absl::OkStatus();
}

// --- Memory -------------------------------------------------------------

absl::StatusOr<Buffer> Stream::Allocate(uint64_t bytes) {
  return AllocateWith(bytes, hrx::v1::INITIAL_CONTENTS_UNSPECIFIED,
                      hrx::v1::PLACEMENT_DEVICE);
}

absl::StatusOr<Buffer> Stream::AllocateZeroed(uint64_t bytes) {
  return AllocateWith(bytes, hrx::v1::INITIAL_CONTENTS_ZEROED,
                      hrx::v1::PLACEMENT_DEVICE);
}

absl::StatusOr<Buffer> Stream::AllocateShared(uint64_t bytes) {
  return AllocateWith(bytes, hrx::v1::INITIAL_CONTENTS_ZEROED,
                      hrx::v1::PLACEMENT_SHARED);
}

absl::StatusOr<Buffer> Stream::AllocateWith(uint64_t bytes, int contents,
                                            int placement) {
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::AllocateRequest request;
  request.set_bytes(bytes);
  request.set_contents(static_cast<hrx::v1::InitialContents>(contents));
  request.set_placement(static_cast<hrx::v1::Placement>(placement));
  client::internal::ToProto(handle(), request.mutable_stream());
  hrx::v1::AllocateResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.buffers().Allocate(context.get(), request, &response)));
  return Buffer(state_->shared_connection(),
                client::internal::FromProto(response.buffer()),
                response.bytes(), response.allocation_id(), handle());
}

absl::StatusOr<Buffer> Stream::Import(uint64_t grant) {
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::ImportRequest request;
  request.set_grant(grant);
  hrx::v1::ImportResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.buffers().Import(context.get(), request, &response)));
  return Buffer(state_->shared_connection(),
                client::internal::FromProto(response.buffer()),
                response.bytes(), response.allocation_id(), Handle{});
}

absl::StatusOr<Buffer> Stream::Scratch(uint64_t bytes) {
  const uint64_t want = std::max<uint64_t>(bytes, 1);
  const uint64_t most =
      std::max<uint64_t>(want, bytes > UINT64_MAX / 2 ? UINT64_MAX : bytes * 2);
  auto it = scratch_.lower_bound(want);
  if (it != scratch_.end() && it->first <= most) {
    Buffer buffer = std::move(it->second);
    scratch_.erase(it);
    scratch_bytes_ -= buffer.bytes();
    return buffer;
  }
  return Allocate(bytes);
}

absl::Status Stream::Recycle(Buffer buffer) {
  if (buffer.origin_stream() != handle() ||
      buffer.Binding().brand() != state_->connection().brand()) {
    return Refusal(
        Reason::kScratchForeignStream,
        "recycle: the buffer was allocated by another "
        "stream; a scratch pool belongs to one stream. Fix: recycle it on the "
        "stream that allocated it, or free it.");
  }
  if (buffer.bytes() <=
      scratch_limit_ - std::min(scratch_bytes_, scratch_limit_)) {
    scratch_bytes_ += buffer.bytes();
    scratch_.emplace(buffer.bytes(), std::move(buffer));
  }
  return absl::OkStatus();
}

void Stream::SetScratchLimit(uint64_t bytes) {
  scratch_limit_ = bytes;
  while (scratch_bytes_ > bytes && !scratch_.empty()) {
    auto largest = std::prev(scratch_.end());
    scratch_bytes_ -= largest->first;
    scratch_.erase(largest);
  }
}

uint64_t Stream::scratch_bytes() const { return scratch_bytes_; }

// --- Transfers ----------------------------------------------------------

absl::Status Stream::Fill(const View& dst, uint8_t value) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "fill dst"));
  hrx::v1::Command command;
  client::internal::ToProto(dst, command.mutable_fill()->mutable_dst());
  command.mutable_fill()->set_value(value);
  return state_->Append(std::move(command), 0);
}

absl::Status Stream::Copy(const View& dst, const View& src) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "copy dst"));
  HRX_RETURN_IF_ERROR(CheckOwned(src, "copy src"));
  if (dst.length() != src.length()) {
    return Refusal(Reason::kCopyLengthMismatch,
                   absl::StrFormat("copy: dst is %u bytes but src is %u bytes. "
                                   "Fix: copy between views of equal length.",
                                   dst.length(), src.length()));
  }
  if (dst.buffer_handle() == src.buffer_handle() &&
      shared::SpansOverlap(dst.offset(), src.offset(), dst.length())) {
    return Refusal(Reason::kCopyOverlap,
                   absl::StrFormat(
                       "copy: dst [%u, +%u) overlaps src [%u, +%u) in the same "
                       "buffer. Fix: copy through a temporary buffer.",
                       dst.offset(), dst.length(), src.offset(), src.length()));
  }
  hrx::v1::Command command;
  client::internal::ToProto(dst, command.mutable_copy()->mutable_dst());
  client::internal::ToProto(src, command.mutable_copy()->mutable_src());
  return state_->Append(std::move(command), 0);
}

bool Stream::EnsureSharedStaging() {
  if (shared_map_ != nullptr) return true;
  if (shared_staging_failed_) return false;
  auto staging = AllocateShared(kSharedStagingBytes);
  if (staging.ok()) {
    auto mapping = staging->Map();
    if (mapping.ok()) {
      shared_staging_ = std::make_unique<Buffer>(*std::move(staging));
      shared_map_ = std::make_unique<Mapping>(*std::move(mapping));
      return true;
    }
  }
  shared_staging_failed_ = true;  // e.g. no shared-bytes budget: stay inline
  return false;
}

// The staging region is used as two halves, so that copying one half on
// the host overlaps with the daemon copying the other; an event per half
// says when its last copy has run.
absl::Status Stream::UploadShared(const View& dst,
                                  std::span<const uint8_t> bytes) {
  if (shared_staging_busy_) HRX_RETURN_IF_ERROR(Synchronize());
  constexpr uint64_t kHalf = kSharedStagingBytes / 2;
  if (bytes.size() <= kHalf) {
    // One chunk: nothing to overlap, so no events to pay for.
    std::memcpy(shared_map_->bytes().data(), bytes.data(), bytes.size());
    HRX_ASSIGN_OR_RETURN(View from, shared_staging_->Slice(0, bytes.size()));
    HRX_ASSIGN_OR_RETURN(View part, dst.Slice(0, bytes.size()));
    HRX_RETURN_IF_ERROR(Copy(part, from));
    shared_staging_busy_ = true;
    return absl::OkStatus();
  }
  std::optional<Event> in_use[2];
  uint64_t index = 0;
  for (uint64_t done = 0; done < bytes.size(); done += kHalf, ++index) {
    const int half = static_cast<int>(index % 2);
    const uint64_t chunk = std::min<uint64_t>(kHalf, bytes.size() - done);
    if (in_use[half]) {
      HRX_RETURN_IF_ERROR(in_use[half]->Synchronize());
      in_use[half].reset();
    }
    std::memcpy(shared_map_->bytes().data() + half * kHalf, bytes.data() + done,
                chunk);
    HRX_ASSIGN_OR_RETURN(View part, dst.Slice(done, chunk));
    HRX_ASSIGN_OR_RETURN(View from,
                         shared_staging_->Slice(half * kHalf, chunk));
    HRX_RETURN_IF_ERROR(Copy(part, from));
    HRX_ASSIGN_OR_RETURN(Event copied, RecordEvent());
    in_use[half].emplace(std::move(copied));
  }
  shared_staging_busy_ = true;  // the last copies may still read the region
  return absl::OkStatus();
}

absl::Status Stream::ReadShared(const View& src, std::span<uint8_t> out,
                                absl::Time deadline) {
  if (shared_staging_busy_) HRX_RETURN_IF_ERROR(Synchronize(deadline));
  constexpr uint64_t kHalf = kSharedStagingBytes / 2;
  if (out.size() <= kHalf) {
    // One chunk: copy in, wait, copy out.
    HRX_ASSIGN_OR_RETURN(View into, shared_staging_->Slice(0, out.size()));
    HRX_RETURN_IF_ERROR(Copy(into, src));
    // Busy until a sync completes: a wait that times out leaves the copy
    // queued, writing the region.
    shared_staging_busy_ = true;
    HRX_RETURN_IF_ERROR(Synchronize(deadline));
    std::memcpy(out.data(), shared_map_->bytes().data(), out.size());
    return absl::OkStatus();
  }
  std::optional<Event> ready[2];
  uint64_t issued = 0;
  auto issue = [&](int half) -> absl::Status {
    const uint64_t chunk = std::min<uint64_t>(kHalf, out.size() - issued);
    HRX_ASSIGN_OR_RETURN(View part, src.Slice(issued, chunk));
    HRX_ASSIGN_OR_RETURN(View into,
                         shared_staging_->Slice(half * kHalf, chunk));
    HRX_RETURN_IF_ERROR(Copy(into, part));
    HRX_ASSIGN_OR_RETURN(Event copied, RecordEvent());
    ready[half].emplace(std::move(copied));
    issued += chunk;
    return absl::OkStatus();
  };
  shared_staging_busy_ = true;  // as above, until a sync completes
  HRX_RETURN_IF_ERROR(issue(0));
  if (issued < out.size()) HRX_RETURN_IF_ERROR(issue(1));
  uint64_t index = 0;
  for (uint64_t taken = 0; taken < out.size(); ++index) {
    const int half = static_cast<int>(index % 2);
    const uint64_t chunk = std::min<uint64_t>(kHalf, out.size() - taken);
    HRX_RETURN_IF_ERROR(ready[half]->Synchronize(deadline));
    ready[half].reset();
    std::memcpy(out.data() + taken, shared_map_->bytes().data() + half * kHalf,
                chunk);
    taken += chunk;
    if (issued < out.size()) HRX_RETURN_IF_ERROR(issue(half));
  }
  shared_staging_busy_ = false;  // every copy into the region has run
  return absl::OkStatus();
}

absl::Status Stream::Upload(const View& dst, std::span<const uint8_t> bytes) {
  HRX_RETURN_IF_ERROR(CheckOwned(dst, "upload dst"));
  if (bytes.size() > dst.length()) {
    return Refusal(
        Reason::kUploadTooLarge,
        absl::StrFormat("upload: %u bytes of data do not fit the %u-byte "
                        "view. Fix: upload at most the view's length.",
                        bytes.size(), dst.length()));
  }
  if (!bytes.empty() && bytes.size() >= shared_threshold_ &&
      EnsureSharedStaging()) {
    return UploadShared(dst, bytes);
  }
  for (uint64_t done = 0; done < bytes.size(); done += kUploadChunkBytes) {
    const uint64_t chunk =
        std::min<uint64_t>(kUploadChunkBytes, bytes.size() - done);
    HRX_ASSIGN_OR_RETURN(View part, dst.Slice(done, chunk));
    hrx::v1::Command command;
    client::internal::ToProto(part, command.mutable_upload()->mutable_dst());
    command.mutable_upload()->set_data(bytes.data() + done, chunk);
    HRX_RETURN_IF_ERROR(state_->Append(std::move(command), chunk));
  }
  return absl::OkStatus();
}

absl::Status Stream::UploadBlocking(const View& dst,
                                    std::span<const uint8_t> bytes,
                                    absl::Time deadline) {
  deadline = state_->connection().Resolve(deadline);
  HRX_RETURN_IF_ERROR(Upload(dst, bytes));
  return Synchronize(deadline);
}

absl::StatusOr<Readback> Stream::Read(const View& src) {
  HRX_RETURN_IF_ERROR(CheckOwned(src, "read src"));
  HRX_ASSIGN_OR_RETURN(Buffer staging, Allocate(src.length()));
  if (!src.empty()) {
    HRX_ASSIGN_OR_RETURN(View whole, staging.Slice(0, src.length()));
    HRX_RETURN_IF_ERROR(Copy(whole, src));
  }
  return Readback(std::move(staging), src.length(), state_.get());
}

absl::Status Stream::ReadBlocking(const View& src, std::span<uint8_t> out,
                                  absl::Time deadline) {
  HRX_RETURN_IF_ERROR(CheckOwned(src, "read src"));
  deadline = state_->connection().Resolve(deadline);
  if (out.size() != src.length()) {
    return Refusal(
        Reason::kReadSizeMismatch,
        absl::StrFormat(
            "read: the view is %u bytes but the destination "
            "holds %u. Fix: pass a destination of exactly the view's length.",
            src.length(), out.size()));
  }
  if (out.empty()) return Synchronize(deadline);
  if (out.size() >= shared_threshold_ && EnsureSharedStaging()) {
    return ReadShared(src, out, deadline);
  }
  for (uint64_t done = 0; done < out.size(); done += kReadChunkBytes) {
    const uint64_t chunk =
        std::min<uint64_t>(kReadChunkBytes, out.size() - done);
    HRX_ASSIGN_OR_RETURN(View part, src.Slice(done, chunk));
    HRX_ASSIGN_OR_RETURN(std::string bytes,
                         state_->Read(part.buffer_handle(), part.offset(),
                                      part.length(), deadline));
    if (bytes.size() != chunk) {
      return Refusal(
          Reason::kShortRead,
          absl::StrFormat(
              "the daemon returned %u bytes for a %u-byte read. Fix: "
              "report this daemon bug.",
              bytes.size(), chunk));
    }
    std::memcpy(out.data() + done, bytes.data(), chunk);
  }
  return absl::OkStatus();
}

// --- Kernels ------------------------------------------------------------

absl::StatusOr<Kernel> Stream::LoadKernel(std::span<const uint8_t> code,
                                          const std::string& entry) {
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::LoadKernelRequest request;
  request.set_code(code.data(), code.size());
  request.set_entry(entry);
  hrx::v1::LoadKernelResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.kernels().LoadKernel(context.get(), request, &response)));
  std::vector<KernelArgument> layout;
  for (const hrx::v1::KernelArg& arg : response.signature().args()) {
    layout.push_back({static_cast<uint32_t>(arg.kind()), arg.size()});
  }
  Kernel kernel(state_->shared_connection(),
                client::internal::FromProto(response.kernel()), entry,
                std::move(layout));
  for (int d = 0; d < 3 && d < response.signature().workgroup_size_size();
       ++d) {
    kernel.info_.workgroup_size[d] = response.signature().workgroup_size(d);
  }
  return kernel;
}

absl::StatusOr<Kernel> Stream::LoadKernelFile(const std::string& path,
                                              const std::string& entry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Refusal(
        Reason::kKernelFileMissing,
        absl::StrFormat("load kernel %s: cannot open %s. Fix: pass the "
                        "path of the kernel's code object.",
                        entry, path));
  }
  const std::vector<uint8_t> code((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  return LoadKernel(code, entry);
}

absl::Status Stream::Dispatch(const Kernel& kernel, Dim3 grid, Dim3 block,
                              const Constants& constants,
                              std::span<const View> bindings) {
  hrx::v1::Command command;
  HRX_RETURN_IF_ERROR(EncodeDispatch(state_->connection().brand(), kernel, grid,
                                     block, constants, bindings,
                                     command.mutable_dispatch()));
  return state_->Append(std::move(command), constants.size());
}

absl::Status Stream::EncodeDispatch(uint64_t brand, const Kernel& kernel,
                                    Dim3 grid, Dim3 block,
                                    const Constants& constants,
                                    std::span<const View> bindings,
                                    hrx::v1::Dispatch* dispatch) {
  if (kernel.brand() != brand) {
    return Refusal(Reason::kForeignKernel,
                   "dispatch: the kernel was loaded by another client "
                   "session. Fix: load it through this stream's hrx::Client.");
  }
  const shared::KernelSignature signature = SignatureOf(kernel);
  HRX_RETURN_IF_ERROR(shared::CheckLaunchShape("dispatch", grid, block,
                                               signature.workgroup_size));
  HRX_RETURN_IF_ERROR(shared::CheckArguments(
      "dispatch", signature, constants.size(), bindings.size()));
  client::internal::ToProto(kernel.handle(), dispatch->mutable_kernel());
  for (int d = 0; d < 3; ++d) {
    dispatch->add_grid(grid[d]);
    dispatch->add_block(block[d]);
  }
  dispatch->set_constants(constants.bytes().data(), constants.size());
  for (const View& view : bindings) {
    HRX_RETURN_IF_ERROR(CheckOwned(brand, view, "dispatch binding"));
    client::internal::ToProto(view, dispatch->add_bindings());
  }
  return absl::OkStatus();
}

// --- Ordering -----------------------------------------------------------

absl::StatusOr<Event> Stream::RecordEvent() {
  const uint64_t id = state_->connection().NextEventId();
  hrx::v1::Command command;
  command.mutable_record_event()->set_event(id);
  HRX_RETURN_IF_ERROR(state_->Append(std::move(command), 0));
  return Event(std::make_shared<client::internal::EventState>(
      state_->shared_connection(), state_, id));
}

absl::Status Stream::WaitEvent(const Event& event) {
  if (event.brand() != state_->connection().brand()) {
    return Refusal(
        Reason::kForeignEvent,
        "wait event: the event belongs to another client's "
        "device. Fix: wait on events recorded through the same hrx::Client.");
  }
  // The recording stream's batch goes first, so the daemon knows the event.
  HRX_RETURN_IF_ERROR(
      event.state_->SendRecord(state_->connection().Deadline()));
  hrx::v1::Command command;
  command.mutable_wait_event()->set_event(event.id());
  return state_->Append(std::move(command), 0);
}

absl::Status Stream::Flush(absl::Time deadline) {
  return state_->Flush(state_->connection().Resolve(deadline));
}

absl::Status Stream::Synchronize(absl::Time deadline) {
  HRX_RETURN_IF_ERROR(
      state_->Synchronize(state_->connection().Resolve(deadline)));
  shared_staging_busy_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> Stream::IsIdle(absl::Time deadline) {
  HRX_ASSIGN_OR_RETURN(const bool idle,
                       state_->Poll(state_->connection().Resolve(deadline)));
  // Everything issued has run, so no queued copy still reads the region.
  if (idle) shared_staging_busy_ = false;
  return idle;
}

absl::StatusOr<StreamStats> Stream::GetStats() {
  HRX_RETURN_IF_ERROR(state_->Flush());
  client::internal::Connection& connection = state_->connection();
  auto context = connection.Context();
  hrx::v1::StreamStatsRequest request;
  client::internal::ToProto(handle(), request.mutable_stream());
  hrx::v1::StreamStatsResponse response;
  HRX_RETURN_IF_ERROR(connection.Check(
      connection.streams().GetStreamStats(context.get(), request, &response)));
  StreamStats stats;
  stats.queue = response.queue();
  stats.published_fence = response.published_fence();
  stats.completed_fence = response.completed_fence();
  stats.pending_staging_ids.assign(response.pending_staging_ids().begin(),
                                   response.pending_staging_ids().end());
  stats.pending_staging_bytes = response.pending_staging_bytes();
  stats.completed_staging_ids.assign(response.completed_staging_ids().begin(),
                                     response.completed_staging_ids().end());
  stats.upload_staging = Counters(response.upload_staging());
  stats.dispatch_cache = Counters(response.dispatch_cache());
  stats.transfer_cache = Counters(response.transfer_cache());
  return stats;
}

absl::StatusOr<std::vector<uint8_t>> Readback::Wait(Stream& stream,
                                                    absl::Time deadline) {
  if (stream.state_.get() != stream_) {
    return Refusal(Reason::kReadbackForeignStream,
                   "this readback was queued on another "
                   "stream. Fix: wait on the stream that called Read.");
  }
  std::vector<uint8_t> bytes(length_);
  HRX_ASSIGN_OR_RETURN(View whole, buffer_.Slice(0, length_));
  HRX_RETURN_IF_ERROR(stream.ReadBlocking(whole, bytes, deadline));
  return bytes;
}

}  // namespace hrx
