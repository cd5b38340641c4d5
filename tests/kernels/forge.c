/* forge: a kernel that acts as the executor it runs in, against hrxd: it
 * writes the frames it is given (hrxd's executor protocol, composed by the
 * test) on the executor's link socket, then searches its own process's
 * memory for two 16-byte markers. Results, as u32s into out:
 *   [0] bytes written to the link, or 0xffffffff and [1] the errno
 *   [2] places marker A was found   [3] places marker B was found
 *   [4] 0, or the errno of opening /proc/self/maps
 * The markers come inverted (each byte ^ 0xff) in the constants, so the
 * only copies of them in memory are the ones the search is for (and the
 * one this kernel builds on its stack, which it skips). Memory is read in
 * place (the executor is not dumpable, so /proc/self/mem is closed to it);
 * a page that faults (a file mapping past its end) ends its region.
 * Arguments: marker A, marker B (16 bytes each, as four 8-byte scalars),
 * frames (buffer), out (>= 20 bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hrx/cpu_kernel.h"

static const hrx_cpu_arg kArgs[] = {
    {HRX_CPU_ARG_SCALAR, 8}, {HRX_CPU_ARG_SCALAR, 8}, {HRX_CPU_ARG_SCALAR, 8},
    {HRX_CPU_ARG_SCALAR, 8}, {HRX_CPU_ARG_BUFFER, 0}, {HRX_CPU_ARG_BUFFER, 0}};

const hrx_cpu_kernel_info forge_info = {
    HRX_CPU_KERNEL_ABI, {1, 1, 1}, 6, kArgs};

enum { kLinkFd = 3 };
static const unsigned long long kMaxRegion = 1ull << 30;

static int Inside(uint64_t where, const void* base, uint64_t bytes) {
  return where >= (uint64_t)(uintptr_t)base &&
         where < (uint64_t)(uintptr_t)base + bytes;
}

static sigjmp_buf fault_jump;
static void OnFault(int signal) { siglongjmp(fault_jump, signal); }

/* Whether the 16 bytes at `p` are `marker`. Byte by byte, not memcmp: a
 * sanitizer intercepts that and would report the memory it searches. */
__attribute__((no_sanitize_address)) static int Matches(
    const unsigned char* p, const unsigned char* marker) {
  for (int i = 0; i < 16; ++i) {
    if (p[i] != marker[i]) return 0;
  }
  return 1;
}

/* Counts `marker` in [begin, end) of this process, read in place; matches
 * inside `skip` (32 bytes) are this kernel's own copy, not counted. A
 * fault ends the region. Unsanitized: the search reads every mapped byte,
 * an AddressSanitizer build's redzones included. */
__attribute__((no_sanitize_address)) static uint32_t Count(
    uint64_t begin, uint64_t end, const unsigned char* marker,
    const unsigned char* skip) {
  volatile uint32_t found = 0;
  volatile uint64_t at = begin;
  if (sigsetjmp(fault_jump, 1) != 0) return found;
  for (; at + 16 <= end; ++at) {
    const unsigned char* p = (const unsigned char*)(uintptr_t)at;
    if (p[0] == marker[0] && Matches(p, marker) && !Inside(at, skip, 32)) {
      ++found;
    }
  }
  return found;
}

int forge(const hrx_cpu_workgroup* wg) {
  uint32_t result[5] = {0, 0, 0, 0, 0};
  if (wg->bindings[1].length < sizeof(result)) return 1;
  const ssize_t wrote =
      write(kLinkFd, wg->bindings[0].data, wg->bindings[0].length);
  if (wrote < 0) {
    result[0] = 0xffffffffu;
    result[1] = (uint32_t)errno;
  } else {
    result[0] = (uint32_t)wrote;
  }
  unsigned char markers[32];
  for (int i = 0; i < 32; ++i) markers[i] = wg->constants[i] ^ 0xff;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) {
    result[4] = (uint32_t)errno;
  } else {
    struct sigaction guard, old_segv, old_bus;
    memset(&guard, 0, sizeof(guard));
    guard.sa_handler = OnFault;
    sigaction(SIGSEGV, &guard, &old_segv);
    sigaction(SIGBUS, &guard, &old_bus);
    char line[512];
    while (fgets(line, sizeof(line), maps) != NULL) {
      unsigned long long begin, end;
      char perms[5];
      if (sscanf(line, "%llx-%llx %4s", &begin, &end, perms) != 3) continue;
      /* Past kMaxRegion: reservations (a sanitizer's shadow memory), not
       * memory the executor has filled; the tables, buffers and rings it
       * holds are far smaller. */
      if (perms[0] != 'r' || strstr(line, "[vvar") != NULL ||
          strstr(line, "[vsyscall") != NULL || end - begin > kMaxRegion) {
        continue;
      }
      result[2] += Count(begin, end, markers, markers);
      result[3] += Count(begin, end, markers + 16, markers);
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    fclose(maps);
  }
  memcpy(wg->bindings[1].data, result, sizeof(result));
  return 0;
}
