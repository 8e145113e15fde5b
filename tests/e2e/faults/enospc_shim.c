/* enospc_shim.c — an LD_PRELOAD library that makes the disk "full" under one folder, for
 * test_faults.py: write(), writev() and pwrite() on a file whose path starts with
 * $KVFUZZ_TEST_ENOSPC_DIR fail with ENOSPC; every other descriptor is untouched.
 *
 *   LD_PRELOAD=build/tests/e2e/libkvfuzz-test-enospc.so KVFUZZ_TEST_ENOSPC_DIR=/tmp/x/findings kvfuzz run ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int is_full(int fd) {
  const char* dir = getenv("KVFUZZ_TEST_ENOSPC_DIR");
  if (dir == NULL || *dir == '\0' || fd <= 2) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return strncmp(path, dir, strlen(dir)) == 0;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*next)(int, const void*, size_t) = NULL;
  if (next == NULL) next = (ssize_t (*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (count > 0 && is_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return next(fd, buf, count);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  static ssize_t (*next)(int, const struct iovec*, int) = NULL;
  if (next == NULL) next = (ssize_t (*)(int, const struct iovec*, int))dlsym(RTLD_NEXT, "writev");
  if (is_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return next(fd, iov, iovcnt);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*next)(int, const void*, size_t, off_t) = NULL;
  if (next == NULL) next = (ssize_t (*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  if (count > 0 && is_full(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return next(fd, buf, count, offset);
}
