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

absl::Status Unknown(std::string_view what, uint64_t id) {
  // hrxd names only objects it made here: a miss is a broken daemon.
  return Refusal(Reason::kStreamProtocol,
                 absl::StrFormat("executor: no %s %u. Fix: report a bug.",
                                 std::string(what), id));
}

void SetStatus(const absl::Status& status, wire::Reply* reply) {
  reply->set_code(static_cast<int>(status.code()));
  reply->set_message(std::string(status.message()));
}

}  // namespace

ExecutorService::ExecutorService(backend::Backend& backend, int socket)
    : backend_(backend), socket_(socket), reader_(socket), writer_(socket) {
  reporter_ = std::thread([this] { ReportProgress(); });
}

ExecutorService::~ExecutorService() {
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
        Reply(request.id(), absl::OkStatus());
        continue;
      }
      // The descriptor a request carries is taken here, in frame order
      // (the reader is this thread's alone).
      shared::UniqueFd fd =
          request.has_import_memory() ? reader_.TakeFd() : shared::UniqueFd();
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
  // hrxd is gone or broke the protocol: the destructor drains and stops.
}

void ExecutorService::Reply(uint64_t id, const absl::Status& status,
                            wire::Reply reply, shared::UniqueFd fd) {
  if (id == 0) return;  // one-way
  reply.set_id(id);
  SetStatus(status, &reply);
  reply.set_has_fd(fd.valid());
  reply.set_bytes_in_use(backend_.bytes_in_use());
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
      auto graph = Graph(request.define_graph());
      if (graph.ok()) graphs_[request.define_graph().graph()] = *graph;
      return Reply(request.id(), graph.status());
    }
    case Request::kEnqueue: {
      absl::Status enqueued = Enqueue(request.enqueue());
      if (!enqueued.ok()) Reply(request.id(), enqueued);
      return;
    }
    case Request::kPing:
      return Reply(request.id(), absl::OkStatus());
    case Request::OP_NOT_SET:
      return Reply(request.id(), Unknown("operation", 0));
  }
}

absl::StatusOr<backend::MemoryRef> ExecutorService::Memory(uint64_t id) const {
  auto it = memories_.find(id);
  if (it == memories_.end()) return Unknown("memory", id);
  return it->second;
}

absl::StatusOr<backend::DispatchRef> ExecutorService::Dispatch(
    const wire::Dispatch& dispatch) const {
  auto kernel = kernels_.find(dispatch.kernel());
  if (kernel == kernels_.end()) return Unknown("kernel", dispatch.kernel());
  if (dispatch.grid_size() != 3 || dispatch.block_size() != 3) {
    return Unknown("launch shape", dispatch.grid_size());
  }
  auto args = std::make_shared<backend::DispatchArgs>();
  args->kernel = kernel->second;
  for (int d = 0; d < 3; ++d) {
    args->grid[d] = dispatch.grid(d);
    args->block[d] = dispatch.block(d);
  }
  args->constants = dispatch.constants();
  for (const wire::Span& binding : dispatch.bindings()) {
    HRX_ASSIGN_OR_RETURN(backend::MemoryRef memory, Memory(binding.memory()));
    args->bindings.push_back({memory, binding.offset(), binding.length()});
  }
  return backend::DispatchRef(std::move(args));
}

absl::StatusOr<backend::GraphRef> ExecutorService::Graph(
    const wire::DefineGraph& graph) const {
  auto plan = std::make_shared<backend::GraphPlan>();
  for (const wire::GraphNode& node : graph.nodes()) {
    backend::GraphNode& out = plan->nodes.emplace_back();
    out.after.assign(node.after().begin(), node.after().end());
    switch (node.op_case()) {
      case wire::GraphNode::kFill: {
        const wire::Fill& fill = node.fill();
        HRX_ASSIGN_OR_RETURN(backend::MemoryRef dst,
                             Memory(fill.dst().memory()));
        out.op = backend::FillOp{dst, fill.dst().offset(), fill.dst().length(),
                                 static_cast<uint8_t>(fill.value())};
        break;
      }
      case wire::GraphNode::kCopy: {
        const wire::Copy& copy = node.copy();
        HRX_ASSIGN_OR_RETURN(backend::MemoryRef dst,
                             Memory(copy.dst().memory()));
        HRX_ASSIGN_OR_RETURN(backend::MemoryRef src,
                             Memory(copy.src().memory()));
        out.op = backend::CopyOp{dst, copy.dst().offset(), src,
                                 copy.src().offset(), copy.dst().length()};
        break;
      }
      case wire::GraphNode::kDispatch: {
        HRX_ASSIGN_OR_RETURN(out.op, Dispatch(node.dispatch()));
        break;
      }
      default:
        out.op = backend::JoinOp{};
        break;
    }
  }
  return backend::GraphRef(std::move(plan));
}

}  // namespace hrx::executor
