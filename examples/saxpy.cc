// saxpy: load a CPU-backend kernel and dispatch it with constants,
// y = a * x + y over a million floats.
//
// Run against `make run`'s daemon (in another terminal):
//   bazel run //examples:saxpy
// which passes the kernel built from tests/kernels/saxpy.c; elsewhere:
//   ./saxpy path/to/saxpy.so
// The kernel is an ELF shared object exporting `saxpy` and `saxpy_info`
// (docs/cpu-kernels.md); the daemon learns its signature when it loads it.
// Loading kernels needs a tenant with load_kernels: without --config the
// daemon's own user has it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "example_util.h"
#include "hrx/client.h"

using hrx_examples::Check;

namespace {

std::span<const uint8_t> AsBytes(const std::vector<float>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()),
          values.size() * sizeof(float)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s path/to/saxpy.so\n", argv[0]);
    return 2;
  }
  auto client = Check(hrx::Client::Connect(), "connect");
  auto stream =
      Check(Check(client->OpenDevice(0), "open device").CreateStream(),
            "create stream");

  constexpr uint32_t kCount = 1 << 20;
  constexpr float kA = 2.5f;
  std::vector<float> x(kCount), y(kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    x[i] = static_cast<float>(i % 1000);
    y[i] = 1.0f;
  }
  auto x_buffer = Check(stream.Allocate(kCount * sizeof(float)), "allocate x");
  auto y_buffer = Check(stream.Allocate(kCount * sizeof(float)), "allocate y");
  Check(stream.Upload(x_buffer.Binding(), AsBytes(x)), "upload x");
  Check(stream.Upload(y_buffer.Binding(), AsBytes(y)), "upload y");

  // The daemon reads the kernel's argument list from saxpy_info: n (u32),
  // a (f32), x (buffer), y (buffer). Scalars go in Constants, buffers as
  // views, each in declaration order.
  auto kernel = Check(stream.LoadKernelFile(argv[1], "saxpy"), "load kernel");
  std::printf("kernel %s: %u constant bytes, %u buffers\n",
              kernel.symbol().c_str(), kernel.info().constant_byte_length,
              kernel.info().binding_count);
  hrx::Constants constants;
  Check(constants.Push(kCount), "push n");
  Check(constants.Push(kA), "push a");
  const hrx::View bindings[] = {x_buffer.Binding(), y_buffer.Binding()};
  constexpr uint32_t kBlock = 256;
  Check(stream.Dispatch(kernel, {kCount / kBlock, 1, 1}, {kBlock, 1, 1},
                        constants, bindings),
        "dispatch");

  std::vector<float> result(kCount);
  Check(stream.ReadBlocking(y_buffer.Binding(),
                            {reinterpret_cast<uint8_t*>(result.data()),
                             kCount * sizeof(float)}),
        "read y");
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < kCount; ++i) {
    if (std::fabs(result[i] - (kA * x[i] + 1.0f)) > 1e-3f) ++wrong;
  }
  std::printf("y[999] = %.1f (expected %.1f); %u of %u wrong\n", result[999],
              kA * 999.0f + 1.0f, wrong, kCount);
  std::printf("saxpy: %s\n", wrong == 0 ? "ok" : "WRONG RESULT");
  return wrong == 0 ? 0 : 1;
}
