// The one function every fuzz target defines (libFuzzer's entry point). The
// same target links into a libFuzzer binary (clang, `make fuzz`) and into a
// corpus replay test (replay_main.cc, any compiler, part of `make test`).
#ifndef HRX_TESTS_FUZZ_FUZZ_TARGET_H_
#define HRX_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A check that must hold for every input: on failure, abort so that the
// fuzzer records the input as a crash (and the replay test fails).
#define HRX_FUZZ_CHECK(condition)                                      \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, \
                   __LINE__, #condition);                              \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

#endif  // HRX_TESTS_FUZZ_FUZZ_TARGET_H_
