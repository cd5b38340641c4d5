// Test fixture: a real hrxd on a temporary socket with one connected libhrx
// client, its device and a stream.
#ifndef HRX_TESTS_CLIENT_FIXTURE_H_
#define HRX_TESTS_CLIENT_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hrx/client.h"
#include "shared/status_matchers.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace hrx::testing {

// Path of a test kernel's code object for the backend under test, e.g.
// KernelPath("add_f32"): a shared object on cpu, a cubin on hip.
inline std::string KernelPath(const std::string& name) {
  return TestBackend() == "hip"
             ? RunfilePath("tests/kernels/gpu/" + name + ".cubin")
             : RunfilePath("tests/kernels/" + name + ".so");
}

class ClientFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = TestDaemon::Start(DaemonFlags());
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    auto client = Client::Connect(daemon_->socket_path(), "fixture");
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto device = client_->OpenDevice(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_.emplace(*std::move(device));
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::make_unique<Stream>(*std::move(stream));
  }

  virtual std::vector<std::string> DaemonFlags() const { return {}; }

  Stream NewStream() {
    auto stream = device_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    return *std::move(stream);
  }

  Buffer Allocate(Stream& stream, uint64_t bytes) {
    auto buffer = stream.Allocate(bytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return *std::move(buffer);
  }

  // Holds `stream`'s queue with the wait_flag kernel until `flag` (one
  // byte) is set from another stream.
  void HoldQueue(Stream& stream, const Buffer& flag) {
    auto kernel = stream.LoadKernelFile(KernelPath("wait_flag"), "wait_flag");
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const View binding = flag.Binding();
    const absl::Status dispatched = stream.Dispatch(
        *kernel, {1, 1, 1}, {1, 1, 1}, Constants(), {&binding, 1});
    ASSERT_TRUE(dispatched.ok()) << dispatched;
    const absl::Status flushed = stream.Flush();
    ASSERT_TRUE(flushed.ok()) << flushed;
  }

  std::vector<uint8_t> ReadAll(Stream& stream, const View& view) {
    std::vector<uint8_t> bytes(view.length());
    const absl::Status read = stream.ReadBlocking(view, bytes);
    EXPECT_TRUE(read.ok()) << read;
    return bytes;
  }

  // The value of a successful StatusOr<bool>; false (and a failure) if not.
  static bool Yes(const absl::StatusOr<bool>& value) {
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() && *value;
  }

  StreamStats Stats(Stream& stream) {
    auto stats = stream.GetStats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : StreamStats{};
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Device> device_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace hrx::testing

#endif  // HRX_TESTS_CLIENT_FIXTURE_H_
