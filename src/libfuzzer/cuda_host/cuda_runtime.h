// cuda_runtime.h — stands in for the CUDA toolkit's header in the kvfuzz-libfuzzer build (cuda_host_standins.h).
#pragma once
#include "cuda_host_standins.h"
