// python_worker.h — a persistent Python process that runs appends on the arena image: the C++
// half of the Python targets (triton-interp, python:MODULE:FUNCTION, ...; python_targets.cpp).
//
// A PythonWorker starts `PYTHON -c <python_worker.py> CONFIG` once, on first use, and keeps it for
// every later case: starting Python and importing triton or torch takes seconds, a case
// milliseconds. The image travels through a memfd that the worker inherits and maps: per case the
// C++ side copies the image in, sends the append as byte offsets into it (JSON over a socketpair,
// the protocol is in python_worker.py), waits for the answer and copies the image back. A Python
// exception is a launch error carrying the traceback's last line; a worker that dies (segfault,
// os._exit) or reports a dead CUDA context is RunStatus::device_fault, which the Isolator records
// as a `crash` and answers by replacing its own worker process, and with it this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arena/arena.h"
#include "case/case.h"
#include "target.h"

namespace kvf {

// How to start a worker.
struct PythonWorkerSpec {
  std::string python;     // interpreter: a path, or a name looked up on PATH
  nlohmann::json config;  // python_worker.py's CONFIG without the fds: mode, module, function, ...
  bool interpret = true;  // TRITON_INTERPRET=1 in its environment (false: removed from it)
};

// What a worker said when it started.
struct PythonHello {
  enum class Kind : uint8_t {
    ready,        // serving cases
    unavailable,  // this machine cannot run it (no triton, no torch, no GPU): exit code 3
    bad_target,   // the target's argument is wrong (no such module or function): exit code 2
  };
  Kind kind = Kind::ready;
  std::string message;      // why not, for unavailable and bad_target
  nlohmann::json versions;  // ready: python, numpy, triton, torch, ... versions it runs
  // ready, call mode: what the function declares it supports (FUNCTION.kvfuzz_capabilities or
  // FUNCTION_capabilities(), gen/capabilities.h); std::nullopt: every case. A declaration that does
  // not parse makes the hello bad_target, naming the key and the expected form.
  std::optional<Capabilities> capabilities;
  bool declares_layouts = false;  // the declaration has the key "layouts" (vllm_legacy only if listed)
  bool declares_families = false; // the declaration has the key "families" (kv_split, k_only, mla only if listed)
  bool declares_padding_modes = false; // the declaration has the key "padding_modes" (sink only if listed)
  bool declares_windows = false;       // the declaration has the key "windows" (ring caches only if listed)
  bool declares_cp_inputs = false;     // the declaration has the key "cp_inputs" (shards only if listed)
  bool declares_addressings = false;   // the declaration has the key "addressings" (csr only if listed)
  bool declares_quant_formats = false; // the declaration has the key "quant_formats" (formats only if listed)
  // The declaration's "inputs" lists "requests" (a Python-only key, read here, not by
  // capabilities_from_json): every call also gets the request structure (request_arrays()).
  bool request_inputs = false;
};

// The interpreter of the Python targets: `option` (--python) if given, else $KVFUZZ_PYTHON, else
// the source tree's Triton venv (build/venv-triton/bin/python, made by scripts/setup-triton.sh)
// if it exists, else "python3" from PATH.
std::string resolve_python(const std::string& option);

// The kvfuzz_triton package directory the worker imports first: $KVFUZZ_TRITON_PKG (a directory
// holding kvfuzz_triton/, e.g. a mutant copy of kernels/triton), else empty.
std::string triton_pkg_override();

// The source tree's kernels/triton (where kvfuzz_triton lives), compiled in.
std::string default_triton_pkg();

class PythonWorker {
 public:
  explicit PythonWorker(PythonWorkerSpec spec);
  ~PythonWorker();
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // Starts the process unless it runs, and returns its hello. Throws InfraError when the process
  // cannot be started or says nothing within `timeout_s`.
  const PythonHello& start(double timeout_s = 300);

  // Runs the append of `c` on `image` (laid out as `layout`): copies it into the shared memfd, asks
  // the worker for the case's calls (one per rank of a context-parallel case, in one message),
  // copies the result back (also when the worker died midway). A function's context-parallel case
  // with input slot_mapping gets kvfuzz's slot mappings written into `image` first. Starts the worker
  // if needed; after a device_fault the next run starts a new one.
  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout);

 private:
  void grow(int64_t bytes);
  void stop();
  RunResult died(const std::string& what);

  PythonWorkerSpec spec_;
  PythonHello hello_;
  int pid_ = -1;
  int sock_ = -1;
  int memfd_ = -1;
  void* shared_ = nullptr;  // the memfd mapped here, capacity_ bytes
  int64_t capacity_ = 0;
};

// Starts a worker for `spec`, reads its hello and stops it; remembered per spec for the life of the
// process (campaigns ask more than once). For Target::unavailable_reason().
PythonHello probe_python_worker(const PythonWorkerSpec& spec);

// Rank `rank`'s append of `c` (the one call of a case without shards; target.h append_params) as
// python_worker.py's CALL: byte offsets into `image`, laid out as `layout`; invalid_slots null unless
// `counter` (a function whose capabilities leave out the counter). With `producer`, a rank of a
// context-parallel case with input slot_mapping also carries "cp_producer", the slot-mapping
// producer's call that makes its slot_mapping first (triton-interp; a Python function gets kvfuzz's
// slot mappings instead, write_reference_slot_mappings).
nlohmann::json call_json(const Case& c, const ArenaLayout& layout, std::byte* image, bool counter = true,
                         int64_t rank = 0, bool producer = false);

// The request structure of a case as the int32 arrays a function declaring "inputs": ["requests"]
// gets (docs/targets.md, "Python targets"). They are not part of the arena: the worker places them
// after the arena image in the memory it shares with Python (read-only inputs: a write to them is a
// launch_error naming the element).
struct RequestArrays {
  std::vector<int32_t> batch_indices;  // [T] request whose block holds row t's slot; -1: padding, invalid, skipped
  std::vector<int32_t> positions;      // [T] that slot's position in the request (logical block * bs + offset); -1 as above
  std::vector<int32_t> seq_lens;       // [B] each request's length after the call (context and new tokens)
  std::vector<int32_t> context_lens;   // [B] each request's tokens before the call
  std::vector<int32_t> block_tables;   // [B, table_width] row-major, -1 past a table's end
  int64_t table_width = 1;             // the longest table, at least 1

  // The arrays in one int32 buffer, in the order above.
  std::vector<int32_t> packed() const;
  // {"batch_indices": OFFSET, ..., "batch_size": B, "table_width": W}: byte offsets of the arrays of
  // packed() placed at byte `at` of the shared image.
  nlohmann::json offsets(int64_t at) const;
  // Which array element int32 element i of packed() is ("block_tables[1, 3]").
  std::string element_name(int64_t i) const;
};
RequestArrays request_arrays(const Case& c);

// The capabilities of a Python declaration (the hello's dict, `where` naming it): "inputs" (which
// only Python functions have) read into `request_inputs`, every other key by capabilities_from_json.
// Throws InputError(where, "/inputs", ...) for a bad "inputs".
Capabilities python_capabilities(const nlohmann::json& declared, const std::string& where, bool& request_inputs);

}  // namespace kvf
