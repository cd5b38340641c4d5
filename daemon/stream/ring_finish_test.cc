#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "daemon/stream/ring_server.h"
#include "gtest/gtest.h"
#include "shared/shm_ring.h"

namespace hrx::daemon {
namespace {

// hrxd's stop and an executor's own end finish one region at the same time,
// over and over: the client always reads one writer's code with that same
// writer's words, never a mix.
TEST(RingFinishTest, OfTwoWritersAtOnceOneEndIsWrittenWhole) {
  const uint64_t bytes = shared::RingRegionBytes(4096, 4096);
  void* region = std::aligned_alloc(4096, bytes);
  ASSERT_NE(region, nullptr);
  const absl::Status stopping = HrxdStopping();
  // A code of its own and words longer than the region keeps.
  const absl::Status gone = absl::AbortedError(
      std::string(shared::kRingFinishMessageBytes, 'x') + " (cut short)");
  const std::string gone_words(
      gone.message().substr(0, shared::kRingFinishMessageBytes));
  int stopping_won = 0;
  int gone_won = 0;
  for (int round = 0; round < 2000; ++round) {
    shared::InitRingRegion(region, 4096, 4096);
    // Both writers spin until both are there, then write at once.
    std::atomic<int> arrived{0};
    auto finish = [&](const absl::Status& status) {
      arrived.fetch_add(1);
      while (arrived.load() < 2) {
      }
      FinishRingRegion(region, status);
    };
    std::thread other(finish, gone);
    finish(stopping);
    other.join();
    const auto& header = *static_cast<const shared::RingHeader*>(region);
    ASSERT_EQ(header.finished.load(), 1u);
    const std::string words(header.finish_message, header.finish_message_bytes);
    if (header.finish_code.load() == static_cast<int32_t>(stopping.code())) {
      ++stopping_won;
      ASSERT_EQ(words, stopping.message()) << "round " << round;
    } else {
      ++gone_won;
      ASSERT_EQ(header.finish_code.load(), static_cast<int32_t>(gone.code()));
      ASSERT_EQ(words, gone_words) << "round " << round;
    }
  }
  std::free(region);
  RecordProperty("stopping_won", stopping_won);
  RecordProperty("gone_won", gone_won);
  EXPECT_EQ(stopping_won + gone_won, 2000);
}

}  // namespace
}  // namespace hrx::daemon
