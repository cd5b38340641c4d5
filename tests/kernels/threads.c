/* threads: a kernel that starts threads until it may start no more (or
 * `cap`), each sleeping for ever, and writes how many it started into its
 * buffer (u32): what a thread bomb takes from its executor's task limit.
 * Arguments: cap (u32), out (buffer, at least 4 bytes). */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_SCALAR, 4},
                                    {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info threads_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 2, kArgs};

static void* Sleep(void* unused) {
  (void)unused;
  const struct timespec hour = {3600, 0};
  for (;;) nanosleep(&hour, 0);
  return 0;
}

int threads(const hrx_cpu_workgroup* wg) {
  uint32_t cap;
  __builtin_memcpy(&cap, wg->constants, 4);
  if (wg->bindings[0].length < 4) return 1;
  pthread_attr_t small;
  pthread_attr_init(&small);
  pthread_attr_setstacksize(&small, 64 * 1024);
  uint32_t started = 0;
  while (started < cap) {
    pthread_t thread;
    if (pthread_create(&thread, &small, Sleep, 0) != 0) break;
    pthread_detach(thread);
    ++started;
  }
  pthread_attr_destroy(&small);
  __builtin_memcpy(wg->bindings[0].data, &started, 4);
  return 0;
}
