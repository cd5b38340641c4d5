#include "daemon/backend/remote/op_codec.h"

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::backend::remote {
namespace {

namespace wire = hrx::executor::v1;
using ::hrx::shared::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeMemory final : public backend::Memory {
 public:
  explicit FakeMemory(uint64_t size) : size_(size) {}
  uint64_t size() const override { return size_; }
  backend::MemoryKind kind() const override {
    return backend::MemoryKind::kDevice;
  }
  uint64_t id() const override { return 0; }
  uint8_t* host_address() const override { return nullptr; }
  absl::StatusOr<int> ExportFd(backend::ExportKind) const override {
    return absl::FailedPreconditionError(
        "a test's memory has no descriptor to export");
  }

 private:
  const uint64_t size_;
};

class FakeKernel final : public backend::Kernel {
 public:
  const std::string& entry() const override { return entry_; }
  const backend::KernelSignature& signature() const override {
    return signature_;
  }

 private:
  std::string entry_ = "scale";
  backend::KernelSignature signature_;
};

// Both ends of the link at once: hrxd's names and the executor's objects,
// the same objects under ids 100, 101, ...
class Objects final : public RemoteNames, public LocalObjects {
 public:
  backend::MemoryRef AddMemory(uint64_t size) {
    auto memory = std::make_shared<FakeMemory>(size);
    memories_[next_] = memory;
    ids_[memory.get()] = next_++;
    return memory;
  }
  backend::KernelRef AddKernel() {
    auto kernel = std::make_shared<FakeKernel>();
    kernels_[next_] = kernel;
    ids_[kernel.get()] = next_++;
    return kernel;
  }

  absl::StatusOr<uint64_t> MemoryId(const backend::MemoryRef& memory) override {
    return IdOf(memory.get());
  }
  absl::StatusOr<uint64_t> KernelId(const backend::KernelRef& kernel) override {
    return IdOf(kernel.get());
  }
  absl::StatusOr<backend::MemoryRef> Memory(uint64_t id) const override {
    auto it = memories_.find(id);
    if (it == memories_.end()) return UnknownObject("memory", id);
    return it->second;
  }
  absl::StatusOr<backend::KernelRef> Kernel(uint64_t id) const override {
    auto it = kernels_.find(id);
    if (it == kernels_.end()) return UnknownObject("kernel", id);
    return it->second;
  }

 private:
  absl::StatusOr<uint64_t> IdOf(const void* object) const {
    auto it = ids_.find(object);
    if (it == ids_.end()) {
      return Refusal(Reason::kCrossExecutorMemory,
                     "not in this executor. Fix: use its own.");
    }
    return it->second;
  }

  uint64_t next_ = 100;
  std::map<const void*, uint64_t> ids_;
  std::map<uint64_t, backend::MemoryRef> memories_;
  std::map<uint64_t, backend::KernelRef> kernels_;
};

// hrxd sent something no daemon makes: refused as a broken daemon.
void ExpectBrokenDaemon(const absl::Status& status, std::string_view says) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(says)));
  EXPECT_THAT(std::string(status.message()), HasSubstr("Fix: report a bug."));
  EXPECT_EQ(ReasonOf(status), Reason::kStreamProtocol) << status;
}

TEST(OpCodecTest, FillCopyAndWriteArriveAsTheSameOps) {
  Objects objects;
  backend::MemoryRef a = objects.AddMemory(4096);
  backend::MemoryRef b = objects.AddMemory(1024);

  wire::Fill fill;
  ASSERT_THAT(EncodeFill({a, 16, 32, 0xab}, objects, &fill), IsOk());
  auto filled_or = DecodeFill(fill, objects);
  ASSERT_THAT(filled_or, IsOk());
  backend::FillOp filled = *std::move(filled_or);
  EXPECT_EQ(filled.dst, a);
  EXPECT_EQ(filled.offset, 16u);
  EXPECT_EQ(filled.length, 32u);
  EXPECT_EQ(filled.value, 0xab);

  wire::Copy copy;
  ASSERT_THAT(EncodeCopy({b, 8, a, 4000, 96}, objects, &copy), IsOk());
  auto copied_or = DecodeCopy(copy, objects);
  ASSERT_THAT(copied_or, IsOk());
  backend::CopyOp copied = *std::move(copied_or);
  EXPECT_EQ(copied.dst, b);
  EXPECT_EQ(copied.dst_offset, 8u);
  EXPECT_EQ(copied.src, a);
  EXPECT_EQ(copied.src_offset, 4000u);
  EXPECT_EQ(copied.length, 96u);

  wire::Write write;
  ASSERT_THAT(EncodeWrite(b, 1000, std::string(24, 'x'), objects, &write),
              IsOk());
  auto written_or = DecodeWrite(write, objects);
  ASSERT_THAT(written_or, IsOk());
  DecodedSpan written = *std::move(written_or);
  EXPECT_EQ(written.memory, b);
  EXPECT_EQ(written.offset, 1000u);
  EXPECT_EQ(written.length, 24u);
  EXPECT_EQ(write.data(), std::string(24, 'x'));
}

TEST(OpCodecTest, DispatchAndGraphArriveWithTheirKernelShapeAndBindings) {
  Objects objects;
  backend::MemoryRef a = objects.AddMemory(256);
  backend::MemoryRef b = objects.AddMemory(512);
  backend::KernelRef kernel = objects.AddKernel();
  auto dispatch = std::make_shared<backend::DispatchArgs>();
  dispatch->kernel = kernel;
  dispatch->grid = {4, 2, 1};
  dispatch->block = {64, 1, 1};
  dispatch->constants = std::string("\x01\x02\x03\x04", 4);
  dispatch->bindings = {{a, 0, 256}, {b, 128, 64}};

  wire::Dispatch encoded;
  ASSERT_THAT(EncodeDispatch(*dispatch, objects, &encoded), IsOk());
  auto decoded_or = DecodeDispatch(encoded, objects);
  ASSERT_THAT(decoded_or, IsOk());
  backend::DispatchRef decoded = *std::move(decoded_or);
  EXPECT_EQ(decoded->kernel, kernel);
  EXPECT_EQ(decoded->grid, dispatch->grid);
  EXPECT_EQ(decoded->block, dispatch->block);
  EXPECT_EQ(decoded->constants, dispatch->constants);
  ASSERT_EQ(decoded->bindings.size(), 2u);
  EXPECT_EQ(decoded->bindings[1].memory, b);
  EXPECT_EQ(decoded->bindings[1].offset, 128u);
  EXPECT_EQ(decoded->bindings[1].length, 64u);

  backend::GraphPlan plan;
  plan.nodes.push_back({backend::FillOp{a, 0, 8, 1}, {}});
  plan.nodes.push_back({backend::CopyOp{b, 0, a, 0, 8}, {0}});
  plan.nodes.push_back({backend::DispatchRef(dispatch), {0}});
  plan.nodes.push_back({backend::JoinOp{}, {1, 2}});
  wire::DefineGraph graph;
  ASSERT_THAT(EncodeGraph(plan, objects, &graph), IsOk());
  auto replayed_or = DecodeGraph(graph, objects);
  ASSERT_THAT(replayed_or, IsOk());
  backend::GraphRef replayed = *std::move(replayed_or);
  ASSERT_EQ(replayed->nodes.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<backend::FillOp>(replayed->nodes[0].op));
  EXPECT_EQ(std::get<backend::CopyOp>(replayed->nodes[1].op).src, a);
  EXPECT_EQ(std::get<backend::DispatchRef>(replayed->nodes[2].op)->kernel,
            kernel);
  EXPECT_TRUE(std::holds_alternative<backend::JoinOp>(replayed->nodes[3].op));
  EXPECT_THAT(replayed->nodes[3].after, ElementsAre(1, 2));
}

TEST(OpCodecTest, AnObjectOfAnotherExecutorIsNotEncoded) {
  Objects objects;
  Objects elsewhere;
  backend::MemoryRef foreign = elsewhere.AddMemory(64);
  wire::Fill fill;
  absl::Status status = EncodeFill({foreign, 0, 64, 0}, objects, &fill);
  EXPECT_EQ(ReasonOf(status), Reason::kCrossExecutorMemory) << status;
}

TEST(OpCodecTest, SpansAreCheckedAgainstTheirMemoryAtTheEdge) {
  Objects objects;
  objects.AddMemory(4096);  // id 100
  wire::Span span;
  span.set_memory(100);
  span.set_offset(4000);
  span.set_length(96);  // ends exactly at the last byte
  EXPECT_THAT(DecodeSpan(span, objects).status(), IsOk());
  span.set_length(97);
  ExpectBrokenDaemon(DecodeSpan(span, objects).status(),
                     "span at 4000 of 97 bytes past memory 100 of 4096 bytes");
  // An offset + length that wraps around is past the end too.
  span.set_offset(8);
  span.set_length(std::numeric_limits<uint64_t>::max() - 4);
  ExpectBrokenDaemon(DecodeSpan(span, objects).status(), "past memory 100");
  // Nothing at the very end is still inside.
  span.set_offset(4096);
  span.set_length(0);
  EXPECT_THAT(DecodeSpan(span, objects).status(), IsOk());
  span.set_offset(4097);
  span.set_length(0);
  ExpectBrokenDaemon(DecodeSpan(span, objects).status(), "past memory 100");
  span.set_memory(7);
  span.set_offset(0);
  ExpectBrokenDaemon(DecodeSpan(span, objects).status(), "no memory 7");
}

TEST(OpCodecTest, MalformedOpsAreRefusedAsABrokenDaemon) {
  Objects objects;
  objects.AddMemory(64);  // id 100
  objects.AddKernel();    // id 101

  wire::Copy copy;
  copy.mutable_dst()->set_memory(100);
  copy.mutable_dst()->set_length(8);
  copy.mutable_src()->set_memory(100);
  copy.mutable_src()->set_offset(32);
  copy.mutable_src()->set_length(16);
  ExpectBrokenDaemon(DecodeCopy(copy, objects).status(),
                     "copy of 16 bytes into 8");

  wire::Write write;
  write.mutable_dst()->set_memory(100);
  write.mutable_dst()->set_length(4);
  write.set_data("12345");
  ExpectBrokenDaemon(DecodeWrite(write, objects).status(),
                     "a write of 5 bytes into a span of 4");

  wire::Dispatch dispatch;
  dispatch.set_kernel(101);
  dispatch.add_grid(1);
  dispatch.add_grid(1);
  dispatch.add_block(1);
  ExpectBrokenDaemon(DecodeDispatch(dispatch, objects).status(),
                     "a launch of 2 x 1 dimensions");
  dispatch.add_grid(1);
  dispatch.add_block(1);
  dispatch.add_block(1);
  EXPECT_THAT(DecodeDispatch(dispatch, objects).status(), IsOk());
  dispatch.set_kernel(100);  // a memory's id, not a kernel's
  ExpectBrokenDaemon(DecodeDispatch(dispatch, objects).status(),
                     "no kernel 100");

  wire::DefineGraph graph;
  graph.add_nodes()->mutable_join();
  wire::GraphNode* second = graph.add_nodes();
  second->mutable_join();
  second->add_after(1);  // itself
  ExpectBrokenDaemon(DecodeGraph(graph, objects).status(),
                     "graph node 1 ordered after node 1");
}

}  // namespace
}  // namespace hrx::backend::remote
