// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
// from requests shaped like the tests' own: run once after changing a wire
// format, and commit what it writes.
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "hrx/executor/v1/executor.pb.h"
#include "hrx/v1/graph.pb.h"
#include "hrx/v1/kernel.pb.h"
#include "hrx/v1/stream.pb.h"
#include "shared/handle.h"

namespace {

std::filesystem::path root;

void Write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  const auto dir = root / target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A handle of object `kind`/`slot` with tag 0: the decode fuzzer seals it.
void Handle(hrx::shared::HandleKind kind, uint32_t slot, hrx::v1::Handle* out) {
  out->set_object(hrx::shared::Handle{kind, slot, 1}.Encode());
}

void View(uint32_t slot, uint64_t offset, uint64_t length, hrx::v1::View* out) {
  Handle(hrx::shared::HandleKind::kBuffer, slot, out->mutable_buffer());
  out->set_offset(offset);
  out->set_length(length);
}

void Dispatch(hrx::v1::Dispatch* dispatch) {
  Handle(hrx::shared::HandleKind::kKernel, 2, dispatch->mutable_kernel());
  for (int i = 0; i < 3; ++i) {
    dispatch->add_grid(i == 0 ? 4 : 1);
    dispatch->add_block(i == 0 ? 64 : 1);
  }
  dispatch->set_constants(std::string("\x02\x00\x00\x00", 4));
  View(7, 0, 1024, dispatch->add_bindings());
}

void DecodeSeeds() {
  hrx::v1::StreamRequest batch;
  batch.set_token(3);
  auto* commands = batch.mutable_batch();
  View(7, 0, 4096, commands->add_commands()->mutable_fill()->mutable_dst());
  commands->mutable_commands(0)->mutable_fill()->set_value(0xab);
  auto* copy = commands->add_commands()->mutable_copy();
  View(8, 0, 512, copy->mutable_dst());
  View(7, 512, 512, copy->mutable_src());
  auto* upload = commands->add_commands()->mutable_upload();
  View(7, 16, 4, upload->mutable_dst());
  upload->set_data("abcd");
  Dispatch(commands->add_commands()->mutable_dispatch());
  commands->add_commands()->mutable_record_event()->set_event(1);
  commands->add_commands()->mutable_wait_event()->set_event(1);
  Handle(hrx::shared::HandleKind::kGraphExec, 9,
         commands->add_commands()->mutable_launch_graph()->mutable_exec());
  batch.mutable_batch()->set_ack(true);
  Write("decode_fuzzer", "batch",
        std::string(1, '\0') + batch.SerializeAsString());

  hrx::v1::StreamRequest read;
  read.set_token(4);
  View(7, 8, 8, read.mutable_read());
  Write("decode_fuzzer", "read",
        std::string(1, '\0') + read.SerializeAsString());
  hrx::v1::StreamRequest sync;
  sync.mutable_sync();
  Write("decode_fuzzer", "sync",
        std::string(1, '\0') + sync.SerializeAsString());

  hrx::v1::CreateGraphExecRequest graph;
  auto* fill = graph.add_nodes()->mutable_fill();
  View(7, 0, 64, fill->mutable_dst());
  fill->set_value(1);
  auto* node = graph.add_nodes();
  Dispatch(node->mutable_dispatch());
  node->add_after(0);
  auto* join = graph.add_nodes();
  join->mutable_join();
  join->add_after(1);
  Write("decode_fuzzer", "graph", "\x01" + graph.SerializeAsString());

  hrx::v1::KernelSignature signature;
  auto* scalar = signature.add_args();
  scalar->set_kind(hrx::v1::KernelArg::KIND_SCALAR);
  scalar->set_size(4);
  signature.add_args()->set_kind(hrx::v1::KernelArg::KIND_BUFFER);
  for (int i = 0; i < 3; ++i) signature.add_workgroup_size(i == 0 ? 64 : 1);
  Write("decode_fuzzer", "signature", "\x02" + signature.SerializeAsString());
}

void ConfigSeeds() {
  Write("config_fuzzer", "tenants",
        "tenants { name: \"bystander\" uids: 4101 }\n"
        "tenants { name: \"ops\" uids: 0 role: ROLE_ADMIN load_kernels: true "
        "isolation: ISOLATION_OWN_EXECUTOR }\n");
  Write("config_fuzzer", "budgets",
        "tenants { name: \"a\" uids: 1000 uids: 1001 budget { device_bytes: "
        "1048576 streams: 4 buffers: 64 } }\n"
        "default_tenant { name: \"other\" role: ROLE_OBSERVER }\n");
  Write("config_fuzzer", "empty", "");
}

void HandleSeeds() {
  Write("handle_fuzzer", "text",
        hrx::shared::FormatWireHandle(
            {0x1234, 0x0100000100000000, 0x0200000100000007, 0xdeadbeef}));
  std::string raw(sizeof(hrx::shared::WireHandle), '\0');
  hrx::shared::WireHandle wire{
      1, hrx::shared::Handle{hrx::shared::HandleKind::kSession, 5, 1}.Encode(),
      hrx::shared::Handle{hrx::shared::HandleKind::kBuffer, 3, 1}.Encode(), 7};
  std::memcpy(raw.data(), &wire, sizeof(wire));
  Write("handle_fuzzer", "wire", raw);
}

void LaunchSeeds() {
  const uint32_t ok[] = {4, 1, 1, 64, 1, 1, 64, 0, 0, 4, 1};
  std::string bytes(reinterpret_cast<const char*>(ok), sizeof(ok));
  bytes += std::string("\x05\x02", 2);  // a 4-byte scalar, a buffer
  Write("launch_fuzzer", "saxpy", bytes);
  const uint32_t big[] = {1, 1, 1, 1024, 2, 1, 0, 0, 0, 0, 0};
  Write("launch_fuzzer", "too_big",
        std::string(reinterpret_cast<const char*>(big), sizeof(big)));
}

std::string Frame(const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  const uint32_t size = static_cast<uint32_t>(body.size());
  return std::string(reinterpret_cast<const char*>(&size), sizeof(size)) + body;
}

void FrameSeeds() {
  hrx::executor::v1::Event hello;
  hello.mutable_hello();
  hrx::executor::v1::Event reply;
  reply.mutable_reply()->set_id(7);
  reply.mutable_reply()->set_message("ok");
  hrx::executor::v1::Event progress;
  progress.mutable_progress()->set_queue(1);
  progress.mutable_progress()->set_completed(42);
  Write("executor_frame_fuzzer", "events",
        Frame(hello) + Frame(reply) + Frame(progress));
  Write("executor_frame_fuzzer", "huge_length",
        std::string("\xff\xff\xff\x7f", 4) + "x");
}

void TicketSeeds() {
  Write("ticket_fuzzer", "live", std::string(17, '\0').replace(0, 1, "\xff"));
  Write("ticket_fuzzer", "live_other_pid",
        std::string(18, '\0').replace(0, 1, "\xff"));
  Write("ticket_fuzzer", "flipped",
        std::string("\xff\x01", 2) + std::string(16, '\0'));
  Write("ticket_fuzzer", "junk", "0123456789abcdef");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  root = argv[1];
  DecodeSeeds();
  ConfigSeeds();
  HandleSeeds();
  LaunchSeeds();
  FrameSeeds();
  TicketSeeds();
  return 0;
}
