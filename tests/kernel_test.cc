// Kernels through the daemon on the CPU backend: loading from bytes,
// signatures, launch validation, exact results, the prepared-dispatch cache
// and its eviction, and Constants.
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "hrx/v1/kernel.grpc.pb.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<uint8_t> Floats(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

Constants AddF32Constants(uint32_t n, float value) {
  Constants constants;
  EXPECT_THAT(constants.Push(n), IsOk());
  EXPECT_THAT(constants.Push(value), IsOk());
  return constants;
}

class KernelTest : public ClientFixture {
 protected:
  void SetUp() override {
    ClientFixture::SetUp();
    auto add = stream_->LoadKernelFile(KernelPath("add_f32"), "add_f32");
    ASSERT_THAT(add.status(), IsOk());
    add_.emplace(*std::move(add));
  }
  std::optional<Kernel> add_;
};

TEST_F(KernelTest, TheDaemonLearnsTheKernelsSignature) {
  EXPECT_EQ(add_->info().parameter_count, 3u);
  EXPECT_EQ(add_->info().constant_byte_length, 8u);
  EXPECT_EQ(add_->info().binding_count, 1u);
  EXPECT_EQ(add_->info().workgroup_size, (std::array<uint32_t, 3>{0, 0, 0}));
  auto pattern =
      stream_->LoadKernelFile(KernelPath("write_pattern"), "write_pattern");
  ASSERT_THAT(pattern.status(), IsOk());
  EXPECT_EQ(pattern->info().workgroup_size,
            (std::array<uint32_t, 3>{64, 1, 1}));
  EXPECT_EQ(pattern->layout()[0].size, 8u);
}

TEST_F(KernelTest, AddF32OverSixteenMillionFloatsIsExact) {
  constexpr uint32_t kCount = 16 << 20;
  // Inputs below 2^16, so every sum is exact in float.
  auto input_at = [](uint32_t i) { return static_cast<float>(i & 0xffff); };
  std::vector<float> input(kCount);
  for (uint32_t i = 0; i < kCount; ++i) input[i] = input_at(i);
  Buffer data = Allocate(*stream_, uint64_t{kCount} * 4);
  ASSERT_THAT(stream_->Upload(data.Binding(), Floats(input)), IsOk());
  const View binding = data.Binding();
  ASSERT_THAT(stream_->Dispatch(*add_, {kCount / 256, 1, 1}, {256, 1, 1},
                                AddF32Constants(kCount, 2.5f), {&binding, 1}),
              IsOk());
  const std::vector<float> out = AsFloats(ReadAll(*stream_, binding));
  ASSERT_EQ(out.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(out[i], input_at(i) + 2.5f) << i;
  }
}

TEST_F(KernelTest, SaxpyAndWritePatternGiveExactResults) {
  auto saxpy = stream_->LoadKernelFile(KernelPath("saxpy"), "saxpy");
  ASSERT_THAT(saxpy.status(), IsOk());
  constexpr uint32_t kCount = 10000;
  std::vector<float> x(kCount), y(kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  Buffer xb = Allocate(*stream_, kCount * 4);
  Buffer yb = Allocate(*stream_, kCount * 4);
  ASSERT_THAT(stream_->Upload(xb.Binding(), Floats(x)), IsOk());
  ASSERT_THAT(stream_->Upload(yb.Binding(), Floats(y)), IsOk());
  Constants constants;
  ASSERT_THAT(constants.Push(kCount), IsOk());
  ASSERT_THAT(constants.Push(2.0f), IsOk());
  const std::vector<View> bindings = {xb.Binding(), yb.Binding()};
  ASSERT_THAT(stream_->Dispatch(*saxpy, {(kCount + 127) / 128, 1, 1},
                                {128, 1, 1}, constants, bindings),
              IsOk());
  const std::vector<float> out = AsFloats(ReadAll(*stream_, yb.Binding()));
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], 2.0f * i + 1.0f) << i;

  auto pattern =
      stream_->LoadKernelFile(KernelPath("write_pattern"), "write_pattern");
  ASSERT_THAT(pattern.status(), IsOk());
  constexpr uint64_t kBytes = 5000;
  Buffer bytes = Allocate(*stream_, kBytes);
  Constants pattern_constants;
  ASSERT_THAT(pattern_constants.Push(kBytes), IsOk());
  ASSERT_THAT(pattern_constants.Push(uint32_t{7}), IsOk());
  const View out_view = bytes.Binding();
  ASSERT_THAT(stream_->Dispatch(*pattern, {(kBytes + 63) / 64, 1, 1},
                                {64, 1, 1}, pattern_constants, {&out_view, 1}),
              IsOk());
  const std::vector<uint8_t> written = ReadAll(*stream_, out_view);
  for (uint64_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(written[i], static_cast<uint8_t>(i * 31 + 7)) << i;
  }
}

TEST_F(KernelTest, LaunchesAreValidatedAgainstShapeAndSignature) {
  Buffer data = Allocate(*stream_, 1024);
  const View binding = data.Binding();
  const Constants good = AddF32Constants(256, 1.0f);
  EXPECT_THAT(
      stream_->Dispatch(*add_, {0, 1, 1}, {64, 1, 1}, good, {&binding, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("bad_launch_shape")));
  EXPECT_THAT(
      stream_->Dispatch(*add_, {1, 1, 1}, {1025, 1, 1}, good, {&binding, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("bad_launch_shape")));
  Constants short_constants;
  ASSERT_THAT(short_constants.Push(uint32_t{256}), IsOk());
  EXPECT_THAT(stream_->Dispatch(*add_, {1, 1, 1}, {256, 1, 1}, short_constants,
                                {&binding, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("constants_mismatch"),
                             HasSubstr("4 bytes"), HasSubstr("take 8"))));
  EXPECT_THAT(stream_->Dispatch(*add_, {1, 1, 1}, {256, 1, 1}, good, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bindings_mismatch")));
  auto pattern =
      stream_->LoadKernelFile(KernelPath("write_pattern"), "write_pattern");
  ASSERT_THAT(pattern.status(), IsOk());
  Constants pattern_constants;
  ASSERT_THAT(pattern_constants.Push(uint64_t{64}), IsOk());
  ASSERT_THAT(pattern_constants.Push(uint32_t{0}), IsOk());
  EXPECT_THAT(stream_->Dispatch(*pattern, {1, 1, 1}, {32, 1, 1},
                                pattern_constants, {&binding, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("workgroup_size_mismatch"),
                             HasSubstr("[64, 1, 1]"))));
}

TEST_F(KernelTest, TheDaemonRepeatsEveryLaunchCheck) {
  RawSession raw(daemon_->socket_path());
  const hrx::v1::Handle stream = *raw.CreateStream();
  const hrx::v1::Handle buffer = *raw.Allocate(64);
  std::ifstream in(KernelPath("write_pattern"), std::ios::binary);
  const std::string code((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  auto kernels = hrx::v1::Kernels::NewStub(raw.channel);
  hrx::v1::LoadKernelRequest load;
  load.set_code(code);
  load.set_entry("write_pattern");
  hrx::v1::LoadKernelResponse loaded;
  {
    auto context = raw.Context();
    ASSERT_TRUE(kernels->LoadKernel(context.get(), load, &loaded).ok());
  }
  auto dispatch = [&](std::vector<uint32_t> grid, std::vector<uint32_t> block,
                      std::string constants, uint64_t offset, uint64_t length,
                      const hrx::v1::Handle& kernel) {
    hrx::v1::SubmitRequest request;
    *request.mutable_stream() = stream;
    hrx::v1::Dispatch* d = request.add_commands()->mutable_dispatch();
    *d->mutable_kernel() = kernel;
    for (uint32_t g : grid) d->add_grid(g);
    for (uint32_t b : block) d->add_block(b);
    d->set_constants(constants);
    hrx::v1::View* view = d->add_bindings();
    *view->mutable_buffer() = buffer;
    view->set_offset(offset);
    view->set_length(length);
    return raw.Submit(request);
  };
  const std::string twelve(12, '\0');
  EXPECT_THAT(dispatch({1, 1, 1}, {64, 1, 1}, twelve, 0, 64, loaded.kernel()),
              IsOk());
  EXPECT_THAT(dispatch({1, 1}, {64, 1, 1}, twelve, 0, 64, loaded.kernel()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("grid has 2 entries")));
  EXPECT_THAT(dispatch({1, 1, 1}, {32, 2, 1}, twelve, 0, 64, loaded.kernel()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("workgroup_size_mismatch")));
  EXPECT_THAT(dispatch({1, 1, 1}, {64, 1, 1}, std::string(8, '\0'), 0, 64,
                       loaded.kernel()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("constants_mismatch")));
  EXPECT_THAT(dispatch({1, 1, 1}, {64, 1, 1}, std::string(257, '\0'), 0, 64,
                       loaded.kernel()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("constants_too_large")));
  EXPECT_THAT(dispatch({1, 1, 1}, {64, 1, 1}, twelve, 8, 64, loaded.kernel()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range: submit command 1 of 1 "
                                 "(dispatch binding 0)")));
  EXPECT_THAT(dispatch({1, 1, 1}, {64, 1, 1}, twelve, 0, 64, buffer),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("wrong_handle_kind")));
  // A declared signature that disagrees with the module is refused.
  hrx::v1::KernelArg* arg = load.mutable_declared()->add_args();
  arg->set_kind(hrx::v1::KernelArg::KIND_BUFFER);
  auto context = raw.Context();
  EXPECT_THAT(
      shared::FromGrpcStatus(kernels->LoadKernel(context.get(), load, &loaded)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("signature_mismatch")));
}

TEST_F(KernelTest, BytesThatAreNotAKernelAreRefused) {
  const std::vector<uint8_t> junk = {1, 2, 3, 4};
  EXPECT_THAT(stream_->LoadKernel(junk, "add_f32"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bad_kernel"), HasSubstr("Fix:"))));
  EXPECT_THAT(stream_->LoadKernelFile(KernelPath("add_f32"), "saxpy"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exports no saxpy")));
}

TEST_F(KernelTest, AKernelThatFailsReportsADeviceFault) {
  Buffer data = Allocate(*stream_, 16);
  const View binding = data.Binding();
  // n = 1000 floats, but the binding holds 4: the kernel refuses to run.
  ASSERT_THAT(stream_->Dispatch(*add_, {1, 1, 1}, {64, 1, 1},
                                AddF32Constants(1000, 1.0f), {&binding, 1}),
              IsOk());
  EXPECT_THAT(stream_->Synchronize(), StatusIs(absl::StatusCode::kInternal,
                                               AllOf(HasSubstr("kernel_failed"),
                                                     HasSubstr("add_f32"))));
}

TEST_F(KernelTest, RepeatedDispatchesReplayFromTheCacheAndFreeingEvicts) {
  Buffer data = Allocate(*stream_, 256 * 4);
  ASSERT_THAT(stream_->Fill(data.Binding(), 0), IsOk());
  const View binding = data.Binding();
  for (int round = 0; round < 2; ++round) {
    for (int delta = 1; delta <= 100; ++delta) {
      ASSERT_THAT(
          stream_->Dispatch(*add_, {1, 1, 1}, {256, 1, 1},
                            AddF32Constants(256, float(delta)), {&binding, 1}),
          IsOk());
    }
    ASSERT_THAT(stream_->Synchronize(), IsOk());
    EXPECT_EQ(Stats(*stream_).dispatch_cache.entries, 100u);
  }
  const StreamStats stats = Stats(*stream_);
  EXPECT_EQ(stats.dispatch_cache.misses, 100u);
  EXPECT_EQ(stats.dispatch_cache.hits, 100u);
  for (float value : AsFloats(ReadAll(*stream_, binding))) {
    ASSERT_EQ(value, 10100.0f);
  }
  // The hit is visible to operators too.
  const RunResult status = RunToCompletion(
      {RunfilePath("client/hrxctl"), "--socket=" + daemon_->socket_path(),
       "status", "--json"},
      daemon_->dir());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out,
              HasSubstr("\"dispatch_cache\": {\"entries\": 100, \"bytes\": "));
  EXPECT_THAT(status.out, ::testing::ContainsRegex(
                              "\"dispatch_cache\": \\{[^}]*\"hits\": 100,"));

  // Freeing the bound buffer empties every entry that bound it.
  ASSERT_THAT(data.Free(), IsOk());
  EXPECT_EQ(Stats(*stream_).dispatch_cache.entries, 0u);
  EXPECT_EQ(QueryStatus(daemon_->socket_path()).dispatch_cache().entries(), 0u);
}

TEST_F(KernelTest, TheDispatchCacheIsBoundedAndSkipsOtherStreamsBuffers) {
  Buffer data = Allocate(*stream_, 256 * 4);
  const View binding = data.Binding();
  for (int delta = 1; delta <= 1100; ++delta) {
    ASSERT_THAT(
        stream_->Dispatch(*add_, {1, 1, 1}, {256, 1, 1},
                          AddF32Constants(256, float(delta)), {&binding, 1}),
        IsOk());
  }
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  const StreamStats stats = Stats(*stream_);
  EXPECT_EQ(stats.dispatch_cache.entries, 1024u);
  EXPECT_EQ(stats.dispatch_cache.evictions, 76u);
  EXPECT_LE(stats.dispatch_cache.bytes, uint64_t{16} << 20);

  // A stream dispatching on a buffer it did not allocate does not cache.
  Stream foreign = NewStream();
  ASSERT_THAT(foreign.Dispatch(*add_, {1, 1, 1}, {256, 1, 1},
                               AddF32Constants(256, 1.0f), {&binding, 1}),
              IsOk());
  ASSERT_THAT(foreign.Synchronize(), IsOk());
  EXPECT_EQ(Stats(foreign).dispatch_cache.entries, 0u);
}

TEST_F(KernelTest, UnloadingAKernelEvictsItsDispatches) {
  Buffer data = Allocate(*stream_, 1024);
  const View binding = data.Binding();
  ASSERT_THAT(stream_->Dispatch(*add_, {1, 1, 1}, {256, 1, 1},
                                AddF32Constants(256, 1.0f), {&binding, 1}),
              IsOk());
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_EQ(Stats(*stream_).dispatch_cache.entries, 1u);
  add_.reset();
  EXPECT_EQ(Stats(*stream_).dispatch_cache.entries, 0u);
  EXPECT_EQ(QueryStatus(daemon_->socket_path()).kernels(), 0u);
}

TEST_F(KernelTest, ConstantsPackLittleEndianWithinTheirCapacity) {
  Constants constants;
  for (int i = 0; i < 64; ++i) ASSERT_THAT(constants.Push(uint32_t(i)), IsOk());
  EXPECT_EQ(constants.size(), 256u);
  EXPECT_THAT(constants.Push(uint32_t{1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("constants_full")));
  Constants mixed;
  ASSERT_THAT(mixed.Push(uint32_t{0x01020304}), IsOk());
  ASSERT_THAT(mixed.Push(-1.5), IsOk());
  ASSERT_EQ(mixed.size(), 12u);
  EXPECT_EQ(mixed.bytes()[0], 0x04);
  EXPECT_EQ(mixed.bytes()[3], 0x01);
  // The double sits at byte 4, unaligned: read it as bytes.
  double packed = 0;
  std::memcpy(&packed, mixed.bytes().data() + 4, sizeof(packed));
  EXPECT_EQ(packed, -1.5);
  EXPECT_THAT(Constants::FromBytes(std::vector<uint8_t>(256)).status(), IsOk());
  EXPECT_THAT(Constants::FromBytes(std::vector<uint8_t>(257)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("view_out_of_range")));
}

TEST_F(KernelTest, IndicesPackAHomogeneousIndexList) {
  const std::vector<uint32_t> two = {256, 7};
  auto indices = Constants::Indices(*add_, two);  // 8 bytes: two u32 slots
  ASSERT_THAT(indices.status(), IsOk());
  EXPECT_EQ(indices->size(), 8u);
  auto pattern =
      stream_->LoadKernelFile(KernelPath("write_pattern"), "write_pattern");
  ASSERT_THAT(pattern.status(), IsOk());
  // write_pattern takes a u64 and a u32: not a homogeneous list.
  EXPECT_THAT(Constants::Indices(*pattern, two),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not_index_list")));
  // One index in 8 bytes is a 64-bit slot.
  const std::vector<uint32_t> one = {5};
  auto wide = Constants::Indices(*add_, one);
  ASSERT_THAT(wide.status(), IsOk());
  EXPECT_EQ(*reinterpret_cast<const uint64_t*>(wide->bytes().data()), 5u);
  const std::vector<uint32_t> three = {1, 2, 3};
  EXPECT_THAT(Constants::Indices(*add_, three),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not_index_list")));
  EXPECT_THAT(Constants::Indices(*add_, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing_index_constants")));
}

}  // namespace
}  // namespace hrx::testing
