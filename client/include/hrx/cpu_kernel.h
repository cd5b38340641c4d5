/* The C entry ABI of kernels for hrxd's CPU backend (see docs/cpu-kernels.md).
 *
 * A CPU kernel is an ELF shared object. For an entry named E it exports:
 *   int E(const hrx_cpu_workgroup* workgroup);      runs one workgroup
 *   const hrx_cpu_kernel_info E_info;               its signature
 * The daemon loads the object from bytes (through a memfd), reads E_info,
 * and runs a dispatch's grid of workgroups over a thread pool: E is called
 * once per workgroup, possibly concurrently for different workgroups, and
 * loops over the work-items of its block itself. It returns 0, or nonzero to
 * fail the dispatch (the queue then reports a device fault).
 *
 * Kernels are trusted native code: one that writes outside its bindings can
 * corrupt the daemon. Each binding carries its length so kernels can check.
 */
#ifndef HRX_CPU_KERNEL_H_
#define HRX_CPU_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HRX_CPU_KERNEL_ABI 1
#define HRX_CPU_MAX_ARGS 64

enum hrx_cpu_arg_kind {
  HRX_CPU_ARG_SCALAR = 1, /* 4 or 8 bytes in the constant block */
  HRX_CPU_ARG_BUFFER = 2, /* one binding */
};

typedef struct hrx_cpu_arg {
  uint8_t kind; /* enum hrx_cpu_arg_kind */
  uint8_t size; /* 4 or 8 for scalars, 0 for buffers */
} hrx_cpu_arg;

typedef struct hrx_cpu_kernel_info {
  uint32_t abi;               /* HRX_CPU_KERNEL_ABI */
  uint32_t workgroup_size[3]; /* 0 in a dimension: any block size there */
  uint32_t arg_count;         /* at most HRX_CPU_MAX_ARGS */
  const hrx_cpu_arg* args;    /* declaration order */
} hrx_cpu_kernel_info;

typedef struct hrx_cpu_binding {
  uint8_t* data;   /* the view's first byte */
  uint64_t length; /* the view's length in bytes */
} hrx_cpu_binding;

typedef struct hrx_cpu_workgroup {
  uint32_t grid[3];  /* workgroups per dimension */
  uint32_t block[3]; /* work-items per workgroup */
  uint32_t group[3]; /* the workgroup this call runs */
  const uint8_t*
      constants; /* packed little-endian scalars, declaration order */
  uint32_t constants_bytes;
  const hrx_cpu_binding* bindings; /* buffer arguments, declaration order */
  uint32_t binding_count;
} hrx_cpu_workgroup;

typedef int (*hrx_cpu_kernel_fn)(const hrx_cpu_workgroup* workgroup);

#ifdef __cplusplus
}
#endif

#endif /* HRX_CPU_KERNEL_H_ */
