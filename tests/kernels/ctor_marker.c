/* ctor_marker: an object whose ELF constructor runs as soon as it is mapped
 * (before any entry point is looked up) and leaves a file,
 * /tmp/hrx-ctor-ran-<pid>, naming the process it ran in. The adversarial
 * suite loads it to prove that a tenant without load_kernels never gets its
 * code run inside hrxd. It exports no kernel. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/hrx-ctor-ran-%d", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) close(fd);
}
