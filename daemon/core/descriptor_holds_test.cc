#include "daemon/core/descriptor_holds.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/backend/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"

namespace hrx::daemon {
namespace {

using ::hrx::shared::IsOk;

class DescriptorHoldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ExportDescriptionsCanBeTracked())
        << "this kernel cannot report exported descriptions";
    auto memory = backend_.Allocate(4096, backend::MemoryKind::kHostCoherent,
                                    /*zeroed=*/true);
    ASSERT_THAT(memory.status(), IsOk());
    memory_ = *std::move(memory);
  }

  backend::CpuBackend backend_{
      backend::CpuBackendOptions{.memory_bytes = 1 << 20}};
  backend::MemoryRef memory_;
};

TEST_F(DescriptorHoldsTest, GoneOnlyOnceNoExportedDescriptionIsOpenOrMapped) {
  EXPECT_TRUE(ExportDescriptionsGone(*memory_));  // hrxd's own do not count
  auto exported = OpenExportDescription(*memory_);
  ASSERT_THAT(exported.status(), IsOk());
  EXPECT_FALSE(ExportDescriptionsGone(*memory_));
  void* mapped = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
                      exported->get(), 0);
  ASSERT_NE(mapped, MAP_FAILED);
  exported->Reset();  // closed, but still mapped
  EXPECT_FALSE(ExportDescriptionsGone(*memory_));
  munmap(mapped, 4096);
  EXPECT_TRUE(ExportDescriptionsGone(*memory_));
}

TEST_F(DescriptorHoldsTest, AForkedChildsCopyKeepsItUntilTheChildLetsGo) {
  auto exported = OpenExportDescription(*memory_);
  ASSERT_THAT(exported.status(), IsOk());
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    char byte;
    (void)!read(go[0], &byte, 1);  // holds the inherited copy until told
    _exit(0);
  }
  close(go[0]);
  exported->Reset();  // the parent's copy goes
  EXPECT_FALSE(ExportDescriptionsGone(*memory_));
  close(go[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(ExportDescriptionsGone(*memory_));
}

}  // namespace
}  // namespace hrx::daemon
