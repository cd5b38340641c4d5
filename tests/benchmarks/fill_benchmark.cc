// Per-command cost of small fills through the daemon against the same fills
// on the CPU backend in-process, measured in one run (the machines are
// shared and noisy, so only the ratio is meaningful).
//
//   bazel run -c opt //tests/benchmarks:fill_benchmark [-- --fills=100000]
//
// Three paths, each enqueuing N fills of 64 bytes then waiting for them:
//   in-process  CpuBackend queue, EnqueueFill x N, Wait
//   daemon      libhrx Stream::Fill x N (batched on Streams.Open), Synchronize
//   unary       one Streams.Submit RPC per fill (the unbatched path), fewer N
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/backend/cpu/cpu_backend.h"
#include "hrx/client.h"
#include "tests/raw_session.h"
#include "tests/subprocess.h"
#include "tests/test_daemon.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kFillBytes = 64;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t FlagValue(int argc, char** argv, const std::string& name,
                   uint64_t fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    uint64_t value = 0;
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0 &&
        absl::SimpleAtoi(arg.substr(prefix.size()), &value)) {
      return value;
    }
  }
  return fallback;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "fill_benchmark: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

double InProcess(uint64_t fills) {
  hrx::backend::CpuBackend backend({.memory_bytes = 1 << 20});
  auto queue = *backend.CreateQueue();
  auto memory =
      *backend.Allocate(4096, hrx::backend::MemoryKind::kDevice, true);
  const auto start = Clock::now();
  hrx::backend::Fence last = 0;
  for (uint64_t i = 0; i < fills; ++i) {
    last = *queue->EnqueueFill(memory, (i % 64) * kFillBytes, kFillBytes,
                               static_cast<uint8_t>(i));
  }
  (void)queue->Wait(last);
  return Seconds(start) / fills;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t fills = FlagValue(argc, argv, "fills", 100000);
  const uint64_t unary_fills = FlagValue(argc, argv, "unary_fills", 2000);

  const std::string dir = hrx::testing::MakeShortTempDir();
  const std::string socket_path = dir + "/hrxd.sock";
  const char* daemon_path = std::getenv("HRXD_BINARY");
  hrx::testing::Subprocess daemon = hrx::testing::Subprocess::Start(
      {daemon_path != nullptr ? daemon_path
                              : hrx::testing::RunfilePath("daemon/hrxd"),
       "--socket=" + socket_path, "--backend=cpu", "--log-level=warn"},
      dir);
  if (!hrx::testing::WaitUntilServing(socket_path, &daemon)) {
    std::fprintf(stderr, "fill_benchmark: hrxd did not start: %s\n",
                 daemon.Stderr().c_str());
    return 1;
  }

  // Warm both paths once so that thread and connection start-up is not timed.
  (void)InProcess(1000);
  const double in_process = InProcess(fills);

  auto client = hrx::Client::Connect(socket_path, "fill_benchmark");
  if (!client.ok()) return Fail("connect", client.status());
  auto stream = (*client)->OpenDevice(0)->CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  auto buffer = stream->Allocate(4096);
  if (!buffer.ok()) return Fail("allocate", buffer.status());
  std::vector<hrx::View> views;
  for (uint64_t i = 0; i < 64; ++i)
    views.push_back(*buffer->Slice(i * kFillBytes, kFillBytes));
  for (int i = 0; i < 1000; ++i) (void)stream->Fill(views[i % 64], 1);
  if (absl::Status s = stream->Synchronize(); !s.ok()) return Fail("warm", s);

  auto start = Clock::now();
  for (uint64_t i = 0; i < fills; ++i) {
    if (absl::Status s = stream->Fill(views[i % 64], static_cast<uint8_t>(i));
        !s.ok()) {
      return Fail("fill", s);
    }
  }
  if (absl::Status s = stream->Synchronize(); !s.ok()) return Fail("sync", s);
  const double batched = Seconds(start) / fills;

  hrx::testing::RawSession raw(socket_path);
  const hrx::v1::Handle raw_stream = *raw.CreateStream();
  const hrx::v1::Handle raw_buffer = *raw.Allocate(4096);
  start = Clock::now();
  for (uint64_t i = 0; i < unary_fills; ++i) {
    if (absl::Status s = raw.Submit(hrx::testing::FillRequest(
            raw_stream, raw_buffer, (i % 64) * kFillBytes, kFillBytes, 1));
        !s.ok()) {
      return Fail("unary submit", s);
    }
  }
  if (absl::Status s = raw.Synchronize(raw_stream); !s.ok()) {
    return Fail("unary sync", s);
  }
  const double unary = Seconds(start) / unary_fills;

  std::printf("fills of %lu bytes, per command:\n",
              static_cast<unsigned long>(kFillBytes));
  std::printf("  in-process cpu backend  %8.3f us  (%lu fills)  baseline\n",
              in_process * 1e6, static_cast<unsigned long>(fills));
  std::printf(
      "  daemon, batched stream  %8.3f us  (%lu fills)  %.2fx baseline\n",
      batched * 1e6, static_cast<unsigned long>(fills), batched / in_process);
  std::printf(
      "  daemon, one RPC each    %8.3f us  (%lu fills)  %.2fx baseline\n",
      unary * 1e6, static_cast<unsigned long>(unary_fills), unary / in_process);
  return 0;
}
