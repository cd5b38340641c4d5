#include "shared/shm_ring.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/refusal.h"
#include "shared/status_matchers.h"

namespace hrx::shared {
namespace {

using ::testing::HasSubstr;

// A region in private memory: the layout and the checks are the same.
class Region {
 public:
  Region(uint64_t submit, uint64_t complete)
      : bytes_(RingRegionBytes(submit, complete)), memory_(bytes_ + 64) {
    InitRingRegion(base(), submit, complete);
  }
  void* base() {
    auto at = reinterpret_cast<uintptr_t>(memory_.data());
    return reinterpret_cast<void*>((at + 63) & ~uintptr_t{63});
  }
  RingHeader& header() { return *static_cast<RingHeader*>(base()); }
  uint8_t* at(uint64_t offset) {
    return static_cast<uint8_t*>(base()) + offset;
  }
  uint64_t bytes() const { return bytes_; }

  PipeWriter SubmitWriter() {
    return PipeWriter(at(header().submit_offset), header().submit_bytes,
                      &header().submit_written, &header().submit_read);
  }
  PipeReader SubmitReader() {
    return PipeReader(at(header().submit_offset), header().submit_bytes,
                      &header().submit_written, &header().submit_read);
  }

 private:
  uint64_t bytes_;
  std::vector<uint8_t> memory_;
};

TEST(ShmRingTest, AFreshRegionPassesItsCheckAndAWrongSizeDoesNot) {
  Region region(4096, 1024);
  EXPECT_THAT(CheckRingRegion(region.base(), region.bytes()), IsOk());
  const absl::Status wrong = CheckRingRegion(region.base(), region.bytes() - 1);
  EXPECT_EQ(ReasonOf(wrong), Reason::kRingUnavailable);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("Fix:"));
  region.header().version = kRingVersion + 1;
  EXPECT_EQ(ReasonOf(CheckRingRegion(region.base(), region.bytes())),
            Reason::kRingUnavailable);
}

TEST(ShmRingTest, MessagesLargerThanThePipeStreamThroughInOrder) {
  Region region(256, 256);
  MessageWriter writer(region.SubmitWriter());
  MessageReader reader(region.SubmitReader(), 1 << 20);
  std::vector<std::string> sent;
  for (int i = 0; i < 50; ++i) {
    sent.push_back(std::string(i * 37 % 1000, static_cast<char>('a' + i % 26)));
  }
  std::vector<std::string> received;
  size_t next = 0;
  std::string message;
  // Alternate: write what fits, read what is there, until all arrive.
  while (received.size() < sent.size()) {
    if (writer.idle() && next < sent.size()) {
      ASSERT_TRUE(writer.Start(sent[next++]).ok());
    } else {
      ASSERT_TRUE(writer.Continue().ok());
    }
    while (true) {
      absl::StatusOr<bool> got = reader.Next(&message);
      ASSERT_TRUE(got.ok()) << got.status();
      if (!*got) break;
      received.push_back(message);
    }
  }
  EXPECT_EQ(received, sent);
}

TEST(ShmRingTest, TwoThreadsPassAMillionBytesIntact) {
  Region region(4096, 4096);
  constexpr int kMessages = 2000;
  std::thread producer([&] {
    MessageWriter writer(region.SubmitWriter());
    for (int i = 0; i < kMessages; ++i) {
      std::string message(500 + i % 300, static_cast<char>(i));
      absl::StatusOr<bool> done = writer.Start(std::move(message));
      while (done.ok() && !*done) done = writer.Continue();
      ASSERT_TRUE(done.ok());
    }
  });
  MessageReader reader(region.SubmitReader(), 1 << 20);
  std::string message;
  for (int i = 0; i < kMessages;) {
    absl::StatusOr<bool> got = reader.Next(&message);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!*got) continue;
    ASSERT_EQ(message, std::string(500 + i % 300, static_cast<char>(i)));
    ++i;
  }
  producer.join();
}

TEST(ShmRingTest, AnImpossibleWriterPositionBreaksTheReader) {
  Region region(256, 256);
  MessageReader reader(region.SubmitReader(), 1 << 20);
  std::string message;
  // More than the pipe holds.
  region.header().submit_written.value.store(257);
  absl::StatusOr<bool> got = reader.Next(&message);
  EXPECT_EQ(ReasonOf(got.status()), Reason::kRingBroken);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("written 257, read 0, capacity 256"));
}

TEST(ShmRingTest, AWriterPositionThatMovesBackwardsBreaksTheReader) {
  Region region(256, 256);
  MessageWriter writer(region.SubmitWriter());
  ASSERT_TRUE(writer.Start("hello").ok());
  MessageReader reader(region.SubmitReader(), 1 << 20);
  std::string message;
  ASSERT_TRUE(*reader.Next(&message));
  region.header().submit_written.value.store(3);
  EXPECT_EQ(ReasonOf(reader.Next(&message).status()), Reason::kRingBroken);
}

TEST(ShmRingTest, AnImpossibleReaderPositionBreaksTheWriter) {
  Region region(256, 256);
  MessageWriter writer(region.SubmitWriter());
  // The reader claims to have read bytes never written.
  region.header().submit_read.value.store(1000);
  EXPECT_EQ(ReasonOf(writer.Start("x").status()), Reason::kRingBroken);
}

TEST(ShmRingTest, ALengthPastTheLimitIsRefusedBeforeAnythingIsAllocated) {
  Region region(256, 256);
  PipeWriter raw = region.SubmitWriter();
  const uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_TRUE(
      raw.Push(std::string_view(reinterpret_cast<const char*>(huge), 4)).ok());
  MessageReader reader(region.SubmitReader(), 1 << 20);
  std::string message;
  const absl::Status refused = reader.Next(&message).status();
  EXPECT_EQ(ReasonOf(refused), Reason::kRingMessageTooLarge);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("claims 2147483647 bytes, past the 1048576-byte"));
}

TEST(ShmRingTest, AMessageOfExactlyTheLimitIsAccepted) {
  Region region(4096, 256);
  MessageWriter writer(region.SubmitWriter());
  MessageReader reader(region.SubmitReader(), 1000);
  std::string message;
  absl::StatusOr<bool> written = writer.Start(std::string(1000, 'z'));
  ASSERT_TRUE(written.ok() && *written);
  ASSERT_TRUE(*reader.Next(&message));
  EXPECT_EQ(message.size(), 1000u);
  ASSERT_TRUE(writer.Start(std::string(1001, 'z')).ok());
  EXPECT_EQ(ReasonOf(reader.Next(&message).status()),
            Reason::kRingMessageTooLarge);
}

TEST(ShmRingTest, ADoorbellWakesAWaiterAndAMovedBellDoesNotSleep) {
  Region region(256, 256);
  RingBell& bell = region.header().daemon_bell;
  const uint32_t seen = bell.bell.load();
  RingDoorbell(bell);
  // The bell moved since `seen`: the wait returns at once.
  WaitOnDoorbell(bell, seen, absl::Hours(1));
  const uint32_t now = bell.bell.load();
  std::thread ringer([&] {
    while (bell.sleeping.load() == 0) std::this_thread::yield();
    RingDoorbell(bell);
  });
  WaitOnDoorbell(bell, now, absl::Hours(1));  // woken, or it would hang
  ringer.join();
  EXPECT_EQ(bell.sleeping.load(), 0u);
}

}  // namespace
}  // namespace hrx::shared
