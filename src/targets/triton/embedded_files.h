// embedded_files.h — the Triton AOT kernel set built into the binary: manifest.json and the cubins
// it names, as read-only data (the generated embed.cpp of kernels/triton/aot_compile.py).
#pragma once

#include <cstddef>
#include <vector>

namespace kvf {

struct EmbeddedFile {
  const char* name;           // "manifest.json", "kv_append_f16_int8_i64.cubin"
  const unsigned char* data;  // lives as long as the program
  size_t size;                // bytes
};

// Every embedded file, manifest.json first. Defined only in builds with the triton target.
std::vector<EmbeddedFile> embedded_triton_files();

}  // namespace kvf
