#include "daemon/executor/executor_service.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::executor {
namespace {

namespace wire = hrx::executor::v1;

using backend::remote::UnknownObject;

void SetStatus(const absl::Status& status, wire::Reply* reply) {
  reply->set_code(static_cast<int>(status.code()));
  reply->set_message(std::string(status.message()));
}

}  // namespace

ExecutorService::ExecutorService(backend::Backend& backend, int socket)
    : backend_(backend), socket_(socket), reader_(socket), writer_(socket) {
  // Before any queue exists (the handler is set once).
  backend_.OnDeviceLost(
      [](const absl::Status& why) { ExitForLostDevice(why); });
  reporter_ = std::thread([this] { ReportProgress(); });
  sessions_ = std::make_unique<ExecutorSessions>(
      // Not owned: the backend outlives this service.
      std::shared_ptr<backend::Backend>(&backend_, [](backend::Backend*) {}),
      [this](const shared::WireHandle& handle, uint64_t session,
             shared::HandleKind kind, std::string_view what) {
        return AskHrxd(handle, session, kind, what);
      },
      [this](uint64_t session, uint64_t stream) {
        wire::Event event;
        event.mutable_ring_ended()->set_session(session);
        event.mutable_ring_ended()->set_stream(stream);
        writer_.Send(event);
      },
      [this](uint64_t session, const std::vector<uint64_t>& objects,
             bool session_ended) {
        wire::Event event;
        event.mutable_released()->set_session(session);
        event.mutable_released()->set_session_ended(session_ended);
        for (uint64_t object : objects) {
          event.mutable_released()->add_objects(object);
        }
        writer_.Send(event);
      });
}

ExecutorService::~ExecutorService() {
  // Rings first: they stop asking and enqueuing before the rest goes.
  sessions_.reset();
  // The queues drain first, while their completions can still report.
  for (auto& [id, state] : queues_) (void)state->queue->Wait(state->last_real);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  reporter_.join();
  queues_.clear();
}

void ExecutorService::Serve() {
  wire::Event hello;
  const backend::DeviceProperties& properties = backend_.properties();
  hello.mutable_hello()->set_backend(properties.backend);
  hello.mutable_hello()->set_name(properties.name);
  hello.mutable_hello()->set_target(properties.target);
  hello.mutable_hello()->set_memory_bytes(properties.memory_bytes);
  hello.mutable_hello()->set_integrated(properties.integrated);
  for (backend::ExportKind kind : backend_.export_kinds()) {
    hello.mutable_hello()->add_export_kinds(static_cast<uint32_t>(kind));
  }
  hello.mutable_hello()->set_pid(static_cast<uint32_t>(getpid()));
  writer_.Send(hello);
  // A reader of its own answers hrxd's pings at once, so a request that
  // legitimately takes long here (a large zeroed allocation, a module load)
  // never looks like a frozen executor; only a stopped process does.
  std::thread reader([this] {
    std::string bytes;
    while (reader_.Next(&bytes)) {
      Request request;
      if (!request.ParseFromString(bytes)) break;
      if (request.has_ping()) {
        wire::Reply pong;
        pong.set_ring_stall_ms(static_cast<uint64_t>(
            absl::ToInt64Milliseconds(sessions_->LongestStall(absl::Now()))));
        for (auto& held : sessions_->Held()) *pong.add_held() = std::move(held);
        pong.set_id(request.id());
        pong.set_bytes_in_use(backend_.bytes_in_use());
        wire::Event event;
        *event.mutable_reply() = std::move(pong);
        // Ahead of queued events (read data, progress): hrxd judges this
        // process by how soon its pong comes.
        writer_.SendFirst(event);
        continue;
      }
      // The descriptor a request carries is taken here, in frame order
      // (the reader is this thread's alone).
      shared::UniqueFd fd =
          request.has_import_memory() || request.has_serve_ring()
              ? reader_.TakeFd()
              : shared::UniqueFd();
      absl::MutexLock lock(&requests_mu_);
      requests_.push_back({std::move(request), std::move(fd)});
    }
    absl::MutexLock lock(&requests_mu_);
    requests_done_ = true;
  });
  while (true) {
    Incoming incoming;
    {
      absl::MutexLock lock(&requests_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(requests_mu_) {
        return requests_done_ || !requests_.empty();
      };
      requests_mu_.Await(absl::Condition(&ready));
      if (requests_.empty()) break;
      incoming = std::move(requests_.front());
      requests_.pop_front();
    }
    incoming_fd_ = std::move(incoming.fd);
    Handle(incoming.request);
  }
  reader.join();
  // hrxd is gone or broke the protocol: nobody answers asks any more, and
  // the destructor drains and stops.
  absl::MutexLock lock(&asks_mu_);
  hrxd_gone_ = true;
  for (auto& [id, pending] : asks_) {
    pending->answer = HrxdGone();
    pending->done = true;
  }
  asks_.clear();
}

absl::StatusOr<uint64_t> ExecutorService::AskHrxd(
    const shared::WireHandle& handle, uint64_t session, shared::HandleKind kind,
    std::string_view what) {
  PendingAsk pending;
  wire::Event event;
  {
    absl::MutexLock lock(&asks_mu_);
    if (hrxd_gone_) {
      return HrxdGone();
    }
    const uint64_t id = next_ask_++;
    asks_[id] = &pending;
    wire::Ask* ask = event.mutable_ask();
    ask->set_ask(id);
    ask->set_session(session);
    ask->mutable_handle()->set_instance(handle.instance);
    ask->mutable_handle()->set_session(handle.session);
    ask->mutable_handle()->set_object(handle.object);
    ask->mutable_handle()->set_tag(handle.tag);
    ask->set_kind(static_cast<uint32_t>(kind));
    ask->set_what(std::string(what));
  }
  writer_.Send(event);
  absl::MutexLock lock(&asks_mu_);
  if (!asks_mu_.AwaitWithTimeout(absl::Condition(&pending.done), kAskLimit)) {
    asks_.erase(event.ask().ask());
    return Refusal(Reason::kShuttingDown,
                   "executor: hrxd did not answer about a handle. Fix: "
                   "reconnect once hrxd answers.");
  }
  return pending.answer;
}

void ExecutorService::Answer(const wire::AskAnswer& answer) {
  absl::StatusOr<uint64_t> result;
  if (answer.code() != 0) {
    result = absl::Status(static_cast<absl::StatusCode>(answer.code()),
                          answer.message());
  } else {
    absl::Status installed = sessions_->Install(answer.install(), *this);
    if (installed.ok()) {
      result = answer.install().handle().object();
    } else {
      result = installed;
    }
  }
  absl::MutexLock lock(&asks_mu_);
  auto it = asks_.find(answer.ask());
  if (it == asks_.end()) return;
  it->second->answer = std::move(result);
  it->second->done = true;
  asks_.erase(it);
}

void ExecutorService::Reply(uint64_t id, const absl::Status& status,
                            wire::Reply reply, shared::UniqueFd fd,
                            bool with_work) {
  if (id == 0) return;  // one-way
  reply.set_id(id);
  SetStatus(status, &reply);
  reply.set_has_fd(fd.valid());
  reply.set_bytes_in_use(backend_.bytes_in_use());
  // After a revocation or a session's end too: hrxd's status is current
  // when the free or close is answered.
  if (with_work) *reply.mutable_work() = sessions_->Work();
  wire::Event event;
  *event.mutable_reply() = std::move(reply);
  writer_.Send(event, std::move(fd));
}

void ExecutorService::Handle(const Request& request) {
  switch (request.op_case()) {
    case Request::kAllocate: {
      const wire::Allocate& allocate = request.allocate();
      auto memory = backend_.Allocate(allocate.bytes(),
                                      allocate.host_coherent()
                                          ? backend::MemoryKind::kHostCoherent
                                          : backend::MemoryKind::kDevice,
                                      allocate.zeroed());
      if (!memory.ok()) return Reply(request.id(), memory.status());
      // Where the host can reach it, hrxd maps the same pages.
      auto fd = (*memory)->ExportFd(backend::ExportKind::kShm);
      memories_[allocate.memory()] = *std::move(memory);
      return Reply(request.id(), absl::OkStatus(), {},
                   fd.ok() ? shared::UniqueFd(*fd) : shared::UniqueFd());
    }
    case Request::kImportMemory: {
      const wire::ImportMemory& import = request.import_memory();
      shared::UniqueFd fd = std::move(incoming_fd_);
      auto memory = backend_.ImportShm(fd.Release(), import.bytes(),
                                       import.host_coherent()
                                           ? backend::MemoryKind::kHostCoherent
                                           : backend::MemoryKind::kDevice);
      if (!memory.ok()) return Reply(request.id(), memory.status());
      memories_[import.memory()] = *std::move(memory);
      return Reply(request.id(), absl::OkStatus());
    }
    case Request::kExportMemory: {
      auto memory = Memory(request.export_memory().memory());
      if (!memory.ok()) return Reply(request.id(), memory.status());
      auto fd = (*memory)->ExportFd(
          static_cast<backend::ExportKind>(request.export_memory().kind()));
      if (!fd.ok()) return Reply(request.id(), fd.status());
      return Reply(request.id(), absl::OkStatus(), {}, shared::UniqueFd(*fd));
    }
    case Request::kForget: {
      const uint64_t id = request.forget().object();
      switch (request.forget().kind()) {
        case wire::Forget::KIND_MEMORY:
          memories_.erase(id);
          break;
        case wire::Forget::KIND_KERNEL:
          kernels_.erase(id);
          break;
        case wire::Forget::KIND_GRAPH:
          graphs_.erase(id);
          break;
        case wire::Forget::KIND_DISPATCH:
          dispatches_.erase(id);
          break;
        default:
          break;
      }
      return;
    }
    case Request::kCreateQueue: {
      auto queue = backend_.CreateQueue();
      if (!queue.ok()) return Reply(request.id(), queue.status());
      auto state = std::make_unique<QueueState>();
      state->queue = *std::move(queue);
      queues_[request.create_queue().queue()] = std::move(state);
      return Reply(request.id(), absl::OkStatus());
    }
    case Request::kLoadKernel: {
      const wire::LoadKernel& load = request.load_kernel();
      auto kernel = backend_.LoadKernel(load.code(), load.entry());
      if (!kernel.ok()) return Reply(request.id(), kernel.status());
      wire::Reply reply;
      const backend::KernelSignature& signature = (*kernel)->signature();
      for (const backend::KernelArg& arg : signature.args) {
        wire::KernelArg* out = reply.add_args();
        out->set_buffer(arg.kind == backend::ArgKind::kBuffer);
        out->set_size(arg.size);
      }
      for (uint32_t size : signature.workgroup_size) {
        reply.add_workgroup_size(size);
      }
      kernels_[load.kernel()] = *std::move(kernel);
      return Reply(request.id(), absl::OkStatus(), std::move(reply));
    }
    case Request::kDefineGraph: {
      auto graph = backend::remote::DecodeGraph(request.define_graph(), *this);
      if (graph.ok()) graphs_[request.define_graph().graph()] = *graph;
      return Reply(request.id(), graph.status());
    }
    case Request::kDefineDispatch: {
      // One-way: a definition that fails (a broken daemon) fails each of
      // its launches with the reason.
      const wire::DefineDispatch& define = request.define_dispatch();
      dispatches_.insert_or_assign(
          define.dispatch(),
          backend::remote::DecodeDispatch(define.args(), *this,
                                          /*cached=*/true));
      return;
    }
    case Request::kEnqueue: {
      absl::Status enqueued = Enqueue(request.enqueue());
      if (!enqueued.ok()) Reply(request.id(), enqueued);
      return;
    }
    case Request::kOpenSession:
      return Reply(request.id(), sessions_->Open(request.open_session()));
    case Request::kEndSession:
      sessions_->End(request.end_session());
      return;
    case Request::kRevoke:
      sessions_->Revoke(request.revoke());
      return Reply(request.id(), absl::OkStatus());
    case Request::kServeRing:
      return Reply(request.id(), sessions_->ServeRing(request.serve_ring(),
                                                      std::move(incoming_fd_)));
    case Request::kAskAnswer:
      return Answer(request.ask_answer());
    case Request::kEventCall: {
      const uint64_t call = request.event_call().call();
      sessions_->Call(request.event_call(),
                      [this, call](absl::Status status, wire::EventAnswer out) {
                        wire::Event event;
                        out.set_call(call);
                        out.set_code(static_cast<int>(status.code()));
                        out.set_message(std::string(status.message()));
                        *event.mutable_event_answer() = std::move(out);
                        writer_.Send(event);
                      });
      return;
    }
    case Request::kPing:
      return Reply(request.id(), absl::OkStatus());
    case Request::kReportWork:
      return Reply(request.id(), absl::OkStatus());
    case Request::OP_NOT_SET:
      return Reply(request.id(), UnknownObject("operation", 0));
  }
}

absl::StatusOr<backend::MemoryRef> ExecutorService::Memory(uint64_t id) const {
  auto it = memories_.find(id);
  if (it == memories_.end()) return UnknownObject("memory", id);
  return it->second;
}

absl::StatusOr<backend::GraphRef> ExecutorService::Graph(uint64_t id) const {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return UnknownObject("graph", id);
  return it->second;
}

absl::StatusOr<backend::KernelRef> ExecutorService::Kernel(uint64_t id) const {
  auto it = kernels_.find(id);
  if (it == kernels_.end()) return UnknownObject("kernel", id);
  return it->second;
}

}  // namespace hrx::executor
