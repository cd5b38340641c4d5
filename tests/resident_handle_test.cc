// Resident handles: buffers reach clients as descriptors over the side
// channel, mapped across processes with no copy; tickets are single-use,
// short-lived and bound to the exporting process.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/internal/fd_channel.h"
#include "gmock/gmock.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "shared/grpc_status.h"
#include "tests/client_fixture.h"
#include "tests/raw_session.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

constexpr char kConfig[] = R"(
# Each in an executor of its own: what one grants the other crosses
# executors (hrxd passes the memfd; the grantee's executor imports it).
tenants { name: "alpha" uids: 4001 isolation: ISOLATION_OWN_EXECUTOR load_kernels: true }
tenants { name: "beta" uids: 4002 isolation: ISOLATION_OWN_EXECUTOR load_kernels: true }
tenants {
  name: "ops"
  uids: 0
  role: ROLE_ADMIN
  budget { device_bytes: 1073741824 }  # budgeted: freed memory is not pooled
}
)";

class ResidentHandleTest : public ClientFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    const std::string config =
        "/tmp/hrx-resident-" + std::to_string(getpid()) + ".conf";
    std::ofstream(config) << kConfig;
    return {"--config=" + config, "--socket_mode=0666",
            "--ticket_lifetime_ms=300"};
  }

  hrx::v1::ExportResponse Export(RawSession& raw,
                                 const hrx::v1::Handle& buffer) {
    auto context = raw.Context();
    hrx::v1::ExportRequest request;
    *request.mutable_buffer() = buffer;
    request.set_kind(hrx::v1::HANDLE_KIND_SHM);
    hrx::v1::ExportResponse response;
    EXPECT_TRUE(raw.buffers->Export(context.get(), request, &response).ok());
    return response;
  }

  uint64_t TenantSharedBytes(const std::string& name) {
    return TenantUsage(name).shared_bytes();
  }
  // Both tenants' executors run, each a process of its own.
  void ExpectExecutorsOfTheirOwn() {
    const pid_t alpha = ExecutorPid(daemon_->process().pid(), "alpha");
    const pid_t beta = ExecutorPid(daemon_->process().pid(), "beta");
    EXPECT_NE(alpha, 0);
    EXPECT_NE(beta, 0);
    EXPECT_NE(alpha, beta);
  }
  hrx::v1::Usage TenantUsage(const std::string& name) {
    auto stub = hrx::v1::Admin::NewStub(
        client::internal::MakeChannel(daemon_->socket_path()));
    grpc::ClientContext context;
    hrx::v1::ListTenantsResponse response;
    EXPECT_TRUE(
        stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), &response)
            .ok());
    for (const auto& tenant : response.tenants()) {
      if (tenant.name() == name) return tenant.usage();
    }
    ADD_FAILURE() << "no tenant " << name;
    return hrx::v1::Usage();
  }
};

TEST_F(ResidentHandleTest, AMappingSeesDeviceWritesAfterSyncAndViceVersa) {
  auto buffer = stream_->AllocateShared(1 << 20);
  ASSERT_THAT(buffer.status(), IsOk());
  auto mapping = buffer->Map();
  ASSERT_THAT(mapping.status(), IsOk());
  ASSERT_EQ(mapping->size(), 1u << 20);
  auto words = mapping->As<uint32_t>();
  ASSERT_THAT(words.status(), IsOk());
  for (uint32_t i = 0; i < words->size(); ++i) (*words)[i] = i;
  // The device reads what the client wrote...
  Buffer copy = Allocate(*stream_, 1 << 20);
  ASSERT_THAT(stream_->Copy(copy.Binding(), buffer->Binding()), IsOk());
  std::vector<uint8_t> seen = ReadAll(*stream_, *copy.Slice(4, 4));
  EXPECT_EQ(seen, (std::vector<uint8_t>{1, 0, 0, 0}));
  // ...and the client sees what the device wrote, after synchronizing.
  ASSERT_THAT(stream_->Fill(*buffer->Slice(0, 4096), 0xab), IsOk());
  ASSERT_THAT(stream_->Synchronize(), IsOk());
  EXPECT_THAT(mapping->bytes().subspan(0, 4096), Each(0xab));
  EXPECT_EQ((*words)[1024], 1024u);
  using Triple = std::array<uint8_t, 3>;
  EXPECT_THAT(mapping->As<Triple>(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("mapping_not_typed")));
}

TEST_F(ResidentHandleTest, AnotherProcessMapsAGrantedBufferWithNoCopy) {
  const std::string go = daemon_->dir() + "/go";
  auto tenant = [&](uid_t uid, std::vector<std::string> args) {
    std::vector<std::string> argv = {RunfilePath("tests/tenant_client"),
                                     "--socket=" + daemon_->socket_path(),
                                     absl::StrCat("--uid=", uid)};
    argv.insert(argv.end(), args.begin(), args.end());
    return Subprocess::Start(argv, daemon_->dir());
  };
  Subprocess owner = tenant(4001, {"--scenario=share_mapped", "--grantee=beta",
                                   "--go=" + go, "--bytes=65536"});
  std::string out;
  for (int i = 0; i < 2000 && out.find("grant: ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    out = owner.Stdout();
  }
  ASSERT_NE(out.find("grant: "), std::string::npos) << owner.Stderr();
  const std::string grant = out.substr(out.find("grant: ") + 7, 16);
  Subprocess grantee =
      tenant(4002, {"--scenario=import_mapped", "--grant=" + grant});
  EXPECT_EQ(grantee.Wait(), 0) << grantee.Stdout() << grantee.Stderr();
  std::ofstream(go) << "go";  // the grantee's fill is done: the owner looks
  EXPECT_EQ(owner.Wait(), 0) << owner.Stderr();
  EXPECT_THAT(grantee.Stdout(),
              AllOf(HasSubstr("grantee_sees_owner_bytes: yes"),
                    HasSubstr("grantee_sees_fill: yes")));
  EXPECT_THAT(owner.Stdout(), AllOf(HasSubstr("owner_sees_fill: yes"),
                                    HasSubstr("owner_tail_intact: yes")));
  // The bytes crossed executors: each tenant's is a process of its own.
  ExpectExecutorsOfTheirOwn();
}

// Each tenant's kernel, in its own executor, works on the same shared
// buffer: the grantee's adds 2.5 to the owner's floats (seen through the
// owner's mapping), then the owner's adds 1 (seen by the owner's read and
// mapping alike).
TEST_F(ResidentHandleTest,
       BothTenantsKernelsWorkOnASharedBufferAcrossExecutors) {
  constexpr int kCount = 1 << 16;
  const std::string go = daemon_->dir() + "/go-kernels";
  auto tenant = [&](uid_t uid, std::vector<std::string> args) {
    std::vector<std::string> argv = {
        RunfilePath("tests/tenant_client"),
        "--socket=" + daemon_->socket_path(), absl::StrCat("--uid=", uid),
        "--kernel=" + KernelPath("add_f32"), absl::StrCat("--count=", kCount)};
    argv.insert(argv.end(), args.begin(), args.end());
    return Subprocess::Start(argv, daemon_->dir());
  };
  Subprocess owner =
      tenant(4001, {"--scenario=share_floats", "--grantee=beta", "--go=" + go});
  ASSERT_TRUE(WaitForOutput(owner, "grant: "))
      << owner.Stdout() << owner.Stderr();
  const std::string out = owner.Stdout();
  const std::string grant = out.substr(out.find("grant: ") + 7, 16);
  Subprocess grantee =
      tenant(4002, {"--scenario=import_add", "--grant=" + grant});
  EXPECT_EQ(grantee.Wait(), 0) << grantee.Stdout() << grantee.Stderr();
  EXPECT_THAT(grantee.Stdout(),
              AllOf(HasSubstr("dispatch: OK"), HasSubstr("sync: OK")));
  std::ofstream(go) << "go";
  EXPECT_EQ(owner.Wait(), 0) << owner.Stderr();
  EXPECT_THAT(owner.Stdout(),
              AllOf(HasSubstr("owner_sees_grantee_kernel: yes"),
                    HasSubstr("dispatch: OK"), HasSubstr("read: OK"),
                    HasSubstr("owner_kernel_sees_both: yes")));
  ExpectExecutorsOfTheirOwn();
}

TEST_F(ResidentHandleTest, TicketsAreSingleUseShortLivedAndBoundToTheExporter) {
  RawSession raw(daemon_->socket_path());
  // Shared: exportable as shm on every backend (GPU device memory is not).
  const hrx::v1::Handle buffer = *raw.Allocate(4096, hrx::v1::PLACEMENT_SHARED);
  // Reused.
  const hrx::v1::ExportResponse once = Export(raw, buffer);
  ASSERT_EQ(once.ticket().size(), 16u);
  auto first = client::internal::RedeemTicket(once.fd_socket(), once.ticket());
  ASSERT_THAT(first.status(), IsOk());
  struct stat info {};
  ASSERT_EQ(fstat(first->get(), &info), 0);
  EXPECT_EQ(info.st_size, 4096);
  EXPECT_THAT(client::internal::RedeemTicket(once.fd_socket(), once.ticket()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("ticket_used")));
  // Expired (this daemon's tickets live 300 ms).
  const hrx::v1::ExportResponse late = Export(raw, buffer);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_THAT(client::internal::RedeemTicket(late.fd_socket(), late.ticket()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("ticket_expired")));
  // Made up.
  EXPECT_THAT(
      client::internal::RedeemTicket(once.fd_socket(), std::string(16, 'x')),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown_ticket")));
  // Another session's process (same uid) and another uid.
  for (uid_t uid : {0u, 4001u}) {
    const hrx::v1::ExportResponse theirs = Export(raw, buffer);
    const RunResult thief = RunToCompletion(
        {RunfilePath("tests/tenant_client"), absl::StrCat("--uid=", uid),
         "--scenario=redeem", "--fd_socket=" + theirs.fd_socket(),
         "--ticket=" + absl::BytesToHexString(theirs.ticket())},
        daemon_->dir());
    EXPECT_THAT(thief.out,
                HasSubstr("redeem: PERMISSION_DENIED ticket_not_yours"))
        << "uid " << uid << ": " << thief.out << thief.err;
  }
}

TEST_F(ResidentHandleTest, DmaBufIsExportedWhereAvailableElseRefusedNamingWhy) {
  auto buffer = stream_->Allocate(4096);
  ASSERT_THAT(buffer.status(), IsOk());
  const hrx::v1::GetStatusResponse status = QueryStatus(daemon_->socket_path());
  // A discrete GPU's driver exports device memory (the NVIDIA H200 of the
  // device runs does); the CPU backend and an integrated GPU, whose buffers
  // are host pages, make dma-bufs through udmabuf, where the kernel offers
  // it.
  const bool available =
      (TestBackend() == "hip" && !DeviceIsIntegrated(daemon_->socket_path())) ||
      access("/dev/udmabuf", R_OK | W_OK) == 0;
  const std::vector<std::string> kinds(status.handle_kinds().begin(),
                                       status.handle_kinds().end());
  const std::vector<std::string> expected =
      available ? std::vector<std::string>({"shm", "dmabuf"})
                : std::vector<std::string>({"shm"});
  EXPECT_EQ(kinds, expected);
  auto dmabuf = buffer->ExportDmaBuf();
  if (available) {
    ASSERT_THAT(dmabuf.status(), IsOk());
    EXPECT_TRUE(dmabuf->fd.valid());
    EXPECT_EQ(dmabuf->bytes, 4096u);
  } else {
    EXPECT_THAT(dmabuf,
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("dmabuf_unavailable"),
                               HasSubstr("/dev/udmabuf"), HasSubstr("Fix:"))));
  }
}

TEST_F(ResidentHandleTest, OrdinaryBuffersMapOnlyWhereTheDeviceIsIntegrated) {
  const bool integrated = DeviceIsIntegrated(daemon_->socket_path());
  // The CPU backend's device memory is a memfd, so it says integrated.
  if (TestBackend() == "cpu") {
    EXPECT_TRUE(integrated);
  }
  auto buffer = stream_->Allocate(1 << 20);
  ASSERT_THAT(buffer.status(), IsOk());
  auto mapping = buffer->Map();
  if (integrated) {
    // An APU's buffers are registered host pages: the client's mapping and
    // the device see the same bytes.
    ASSERT_THAT(mapping.status(), IsOk());
    const std::span<uint8_t> bytes = mapping->bytes();
    ASSERT_EQ(bytes.size(), 1u << 20);
    std::fill_n(bytes.data(), 4096, uint8_t{0x5a});
    auto tail = buffer->Slice(4096, 4096);
    ASSERT_THAT(tail.status(), IsOk());
    ASSERT_THAT(stream_->Fill(*tail, 0x3c), IsOk());
    auto both = buffer->Slice(0, 8192);
    ASSERT_THAT(both.status(), IsOk());
    std::vector<uint8_t> read(8192);
    ASSERT_THAT(stream_->ReadBlocking(*both, read), IsOk());
    EXPECT_EQ(std::count(read.begin(), read.begin() + 4096, 0x5a), 4096);
    EXPECT_EQ(std::count(read.begin() + 4096, read.end(), 0x3c), 4096);
    EXPECT_EQ(bytes[4096], 0x3c);
  } else {
    // A discrete GPU's (the H200 of tools/gpu_run.sh).
    EXPECT_THAT(mapping,
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("not_host_mappable"),
                               HasSubstr("1048576-byte"), HasSubstr("discrete"),
                               HasSubstr("AllocateShared"))));
  }
}

TEST_F(ResidentHandleTest,
       ExportedMemoryStaysChargedUntilEveryMappingIsReleased) {
  const uint64_t before = TenantSharedBytes("ops");
  auto buffer = stream_->AllocateShared(1 << 20);
  ASSERT_THAT(buffer.status(), IsOk());
  auto mapping = buffer->Map();
  ASSERT_THAT(mapping.status(), IsOk());
  mapping->bytes()[0] = 42;
  ASSERT_THAT(buffer->Free(), IsOk());
  // Freed, but this process still maps it: the owner stays charged.
  EXPECT_EQ(TenantSharedBytes("ops"), before + (1 << 20));
  EXPECT_EQ(mapping->bytes()[0], 42);
  mapping = Mapping(std::move(*mapping));  // moving keeps the hold
  EXPECT_EQ(TenantSharedBytes("ops"), before + (1 << 20));
  { Mapping released = std::move(*mapping); }
  EXPECT_EQ(TenantSharedBytes("ops"), before);
}

TEST_F(ResidentHandleTest, LargeTransfersGoThroughSharedMemoryAndRoundTrip) {
  constexpr uint64_t kBytes = (40 << 20) + 12345;  // several staging chunks
  std::vector<uint8_t> data(kBytes);
  for (uint64_t i = 0; i < kBytes; ++i)
    data[i] = static_cast<uint8_t>(i * 13 + (i >> 20));
  Buffer buffer = Allocate(*stream_, kBytes);
  ASSERT_THAT(stream_->Upload(buffer.Binding(), data), IsOk());
  std::vector<uint8_t> out(kBytes);
  ASSERT_THAT(stream_->ReadBlocking(buffer.Binding(), out), IsOk());
  EXPECT_TRUE(out == data);
  // Both went through the stream's shared staging region, not messages.
  const hrx::v1::GetStatusResponse status = QueryStatus(daemon_->socket_path());
  EXPECT_EQ(Stats(*stream_).upload_staging.misses, 0u);  // no inline staging
  EXPECT_GE(status.buffers(), 2u);  // the data buffer and the staging region
}

}  // namespace
}  // namespace hrx::testing
