// devices.h — the GPUs of `run --devices all`, counted without initialising CUDA in kvfuzz itself.
#pragma once

#include <vector>

namespace kvf {

// Device indices 0..count-1 of this machine, asked of the CUDA driver in a child process (kvfuzz
// never creates a CUDA context in its own process). Throws InfraError (exit 3) when there is no
// driver, no device, or this kvfuzz was built without CUDA.
std::vector<int> all_cuda_devices();

}  // namespace kvf
