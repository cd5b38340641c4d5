/* linger: starts one thread that stays in this object's own code for the
 * process's life (waking every millisecond), then returns: what unloading
 * the object under it would crash.
 * Arguments: out (buffer, at least 1 byte; unused but for its check). */
#include <pthread.h>
#include <time.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {{HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info linger_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 1, kArgs};

static void* Linger(void* unused) {
  (void)unused;
  const struct timespec millisecond = {0, 1000000};
  for (;;) nanosleep(&millisecond, 0);
  return 0;
}

int linger(const hrx_cpu_workgroup* wg) {
  if (wg->bindings[0].length < 1) return 1;
  pthread_t thread;
  if (pthread_create(&thread, 0, Linger, 0) != 0) return 2;
  pthread_detach(thread);
  return 0;
}
