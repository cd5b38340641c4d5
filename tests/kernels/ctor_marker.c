/* ctor_marker: an object whose ELF constructor runs as soon as it is mapped
 * (before any entry point is looked up) and says so twice, naming the
 * process it ran in: a file, /tmp/hrx-ctor-ran-<pid> (where it may create
 * one: inside hrxd it could; an executor's Landlock refuses it), and a line
 * on stderr, "hrx-ctor-ran-<pid>" (an executor's reaches hrxd's log). The
 * adversarial suite loads it to prove that a tenant without load_kernels
 * never gets its code run, and a permitted one only in its executor. It
 * exports no kernel. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/hrx-ctor-ran-%d", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) close(fd);
  fprintf(stderr, "hrx-ctor-ran-%d\n", (int)getpid());
  fflush(stderr);
}
