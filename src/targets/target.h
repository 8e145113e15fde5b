// target.h — what kvfuzz runs a case on: one interface, one implementation per backend.
//
// A target executes one append on an arena image that already holds every byte's pre-run value
// (arena.h) and leaves the image as the kernel left it; the caller verifies it. Targets never
// classify or print: they report how the run ended (RunStatus) and nothing else.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arena/arena.h"
#include "arena/windows.h"
#include "case/case.h"
#include "gen/capabilities.h"

namespace kvf {

struct TargetInfo {
  std::string name;         // CLI name: "cuda-emu"
  std::string summary;      // one line: what runs where
  std::string supports;     // layouts, dtypes, slot types, limits it accepts
  std::string tolerance;    // value policy it is held to: "exact"
  bool needs_gpu = false;   // true for targets that run on a CUDA device
  // The policy its campaigns use unless --tolerance says otherwise (parse_tolerance syntax, e.g.
  // "exact,fp8_e4m3=written-any-value" for a target that cannot produce fp8 values faithfully).
  std::string default_tolerance = "exact";
  // Seconds one launch may take unless --timeout says otherwise (Python targets start an
  // interpreter, and Triton's interpreter runs a large case for minutes).
  double default_timeout_s = 30;
  // What the kernel supports (gen/capabilities.h): own_kernel_capabilities() for kvfuzz's own
  // targets; std::nullopt for plugin: and python...: targets, whose kernels declare theirs when loaded.
  std::optional<Capabilities> capabilities = own_kernel_capabilities();
};

enum class RunStatus : uint8_t {
  ok,            // the kernel ran to completion
  launch_error,  // the launch was refused (unsupported dtype combination, bad configuration)
  device_fault,  // the device context is dead (sticky CUDA error): the worker must be replaced
  skip,          // the kernel does not support this case (a plugin's KVFZ_APPEND_SKIP): not a finding
};

struct RunResult {
  RunStatus status = RunStatus::ok;
  std::string message;  // for launch_error: why; for skip: the kernel's reason
};

// Construction options of targets.
struct TargetOptions {
  int device = 0;      // CUDA device index for GPU targets (--device)
  std::string python;  // interpreter of the Python targets (--python); empty: $KVFUZZ_PYTHON, then the defaults
  bool in_worker = false;  // made inside a worker process (campaign/isolation.h): skip probes of the
                           // kernel (the parent probed already); only run() and start() will be called
};

// What make_target() was asked for: enough for a worker process to make the same target again.
struct TargetSpec {
  std::string name;
  TargetOptions options;
};

class Target {
 public:
  virtual ~Target() = default;
  // How make_target() made this target; empty for one constructed directly (tests). Workers of a
  // target with a spec are started by fork + exec of kvfuzz itself (campaign/isolation.h).
  const std::optional<TargetSpec>& spec() const { return spec_; }
  void set_spec(TargetSpec spec) { spec_ = std::move(spec); }
  virtual const TargetInfo& info() const = 0;
  // Runs the append of `c` on `image`, laid out as `layout` (plan_arena(c)). Called in a worker
  // process (campaign/isolation.h) unless isolation is off: must not rely on state outside the image.
  virtual RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) = 0;
  // Start-up work of a fresh worker (selecting the device and creating its context, loading modules,
  // dlopen, starting an interpreter), called once before its first case so that no launch's timeout
  // includes it (campaign/isolation.h). Returns "" or why the target cannot start. run() must still
  // work without it (it calls start() itself when needed): in-process runs and tests rely on that.
  virtual std::string start() { return ""; }
  // Runs a large case in windowed mode (arena/windows.h). `image` is a windowed image laid out as
  // `layout`: only plan.ranges hold bytes, every other cache element stands for plan.fill.bits.
  // Must leave plan.ranges as the kernel left them and set `outside` to what the kernel changed in
  // the rest of the cache (differences from plan.fill, outside.checked = true). The default
  // (targets/windowed_host.cpp) builds the whole image in host memory whose cache pages are filled
  // when the kernel first touches them, calls run() on it and checks the pages it touched: right
  // for every target whose kernel reads and writes the image from this process (cuda-emu, golden,
  // CPU plugins). A target that copies the image to a device overrides it (cuda does) — the default
  // would fill the whole cache on the host.
  virtual RunResult run_windowed(const Case& c, std::byte* image, const ArenaLayout& layout, const WindowPlan& plan,
                                 OutsideDiff& outside);
  // Empty when the target can run here; otherwise why not (no driver, no such device). Must not
  // leave state behind in the calling process (GPU targets probe in a child process). May throw
  // InputError when probing shows the target's argument to be wrong (python:MODULE:FUNCTION with
  // no such module).
  virtual std::string unavailable_reason() const { return ""; }
  // What the kernel supports: info().capabilities for kvfuzz's own targets; plugins and Python
  // functions declare theirs. Campaigns send only cases inside it and count the others
  // (gen/capabilities.h); std::nullopt: every case the generator makes.
  virtual std::optional<Capabilities> capabilities() const { return info().capabilities; }
  // The optional inputs the kernel declared beyond what Capabilities holds (a Python function's
  // "inputs": ["requests"]), by name; empty for every other target.
  virtual std::vector<std::string> declared_inputs() const { return {}; }

 private:
  std::optional<TargetSpec> spec_;
};

// Every target this build knows, in `kvfuzz targets` order.
std::vector<TargetInfo> list_targets();

// The own targets this kvfuzz was built without (cuda with no CUDA compiler, triton without Triton
// at build time), each with why: `kvfuzz targets` lists them as not available.
std::vector<std::pair<std::string, std::string>> targets_not_built();

// The targets named by a prefix and an argument ("plugin:PATH.so", "python:MODULE:FUNCTION", ...),
// as usage strings, in `kvfuzz targets` order.
std::vector<std::string> prefix_target_usages();

// The target named `name`. Throws InputError("", "", ...) naming the known targets for an
// unknown name.
std::unique_ptr<Target> make_target(const std::string& name, const TargetOptions& options = {});

// make_target, then InfraError (exit code 3) when the target cannot run on this machine.
std::unique_ptr<Target> open_target(const std::string& name, const TargetOptions& options = {});

// The file holding the code of target `name`, where it is a user's file: PATH of plugin:PATH, the
// module file of python:MODULE:FUNCTION (and python-cuda:, python-numpy:) when MODULE is a path or
// MODULE.py lies in the current directory or a $PYTHONPATH folder; empty for built-in targets or
// when no such file is found.
std::filesystem::path target_file(const std::string& name);

// "fnv1a64:<16 hex digits>" of target_file(name)'s bytes, "" without one: recorded with every saved
// finding, so that `replay` can tell a rebuilt plugin from the one the finding was made on.
std::string target_digest(const std::string& name);

// KvAppendParams of case `c` with pointers into `image` (host or device address of the image's
// first byte); shared by every target that launches kernels/cuda. A context-parallel case
// (case/context_parallel.h) makes one call per rank: rank r's parameters address shard r (its
// caches, scale caches and per-block scales, num_blocks the shard's) and take rank r's inputs;
// `rank` is ignored (0) for other cases.
struct KvAppendParams;
KvAppendParams append_params(const Case& c, std::byte* image, const ArenaLayout& layout, int64_t rank = 0);

// The slot-mapping producer's call for rank `rank` of a context-parallel case with input
// slot_mapping (kernels/cuda/cp_slot_mapping.cuh): its inputs and rank r's slot_mapping in the
// arena's slots section (case/context_parallel.h, CpSection), pointers into `image`.
struct CpSlotMappingParams;
CpSlotMappingParams cp_producer_params(const Case& c, std::byte* image, const ArenaLayout& layout, int64_t rank);

// Writes every rank's slot_mapping of a context-parallel case with input slot_mapping into the
// host image as the formula gives it (context_parallel.h rank_slot_mapping): what a target whose
// kernel has no producer of its own (a plugin without kvfuzz_plugin_cp_slot_mapping, a Python
// function) receives. Does nothing for other cases.
void write_reference_slot_mappings(const Case& c, std::byte* image, const ArenaLayout& layout);

// Adds case `c`'s count of slots >= capacity to the invalid-slot counter in `image`, as the
// contract's counter would: for a kernel that declares no counter (it gets none), so that only
// "never written" is checked.
void add_invalid_slot_count(const Case& c, std::byte* image, const ArenaLayout& layout);

}  // namespace kvf
