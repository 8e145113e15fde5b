// devices.cpp — see devices.h.
#include "devices.h"

#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "base/errors.h"

#if defined(KVFUZZ_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace kvf {

std::vector<int> all_cuda_devices() {
#if defined(KVFUZZ_HAVE_CUDA)
  int fds[2];
  if (pipe(fds) != 0) throw InfraError("--devices all: cannot create a pipe to count the CUDA devices");
  const pid_t pid = fork();
  if (pid < 0) throw InfraError("--devices all: cannot fork to count the CUDA devices");
  if (pid == 0) {
    close(fds[0]);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = -1;
    if (write(fds[1], &count, sizeof count) != static_cast<ssize_t>(sizeof count)) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  int count = -1;
  const bool got = read(fds[0], &count, sizeof count) == static_cast<ssize_t>(sizeof count);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!got || count < 0) throw InfraError("--devices all: the CUDA driver could not be asked for its devices; is an NVIDIA driver installed?");
  if (count == 0) throw InfraError("--devices all: no CUDA device on this machine");
  std::vector<int> devices;
  for (int d = 0; d < count; ++d) devices.push_back(d);
  return devices;
#else
  throw InfraError("--devices all: this kvfuzz was built without CUDA (no GPU target)");
#endif
}

}  // namespace kvf
