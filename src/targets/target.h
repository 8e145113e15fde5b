// target.h — what kvfuzz runs a case on: one interface, one implementation per backend.
//
// A target executes one append on an arena image that already holds every byte's pre-run value
// (arena.h) and leaves the image as the kernel left it; the caller verifies it. Targets never
// classify or print: they report how the run ended (RunStatus) and nothing else.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "arena/arena.h"
#include "case/case.h"

namespace kvf {

struct TargetInfo {
  std::string name;         // CLI name: "cuda-emu"
  std::string summary;      // one line: what runs where
  std::string supports;     // layouts, dtypes, slot types, limits it accepts
  std::string tolerance;    // value policy it is held to: "exact"
  bool needs_gpu = false;   // true for targets that run on a CUDA device
};

enum class RunStatus : uint8_t {
  ok,            // the kernel ran to completion
  launch_error,  // the launch was refused (unsupported dtype combination, bad configuration)
  device_fault,  // the device context is dead (sticky CUDA error): the worker must be replaced
};

struct RunResult {
  RunStatus status = RunStatus::ok;
  std::string message;  // for launch_error: why
};

class Target {
 public:
  virtual ~Target() = default;
  virtual const TargetInfo& info() const = 0;
  // Runs the append of `c` on `image`, laid out as `layout` (plan_arena(c)). Called in a worker
  // process (campaign/isolation.h) unless isolation is off: must not rely on state outside the image.
  virtual RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) = 0;
  // Empty when the target can run here; otherwise why not (no driver, no such device). Must not
  // leave state behind in the calling process (GPU targets probe in a child process).
  virtual std::string unavailable_reason() const { return ""; }
};

// Construction options of targets.
struct TargetOptions {
  int device = 0;  // CUDA device index for GPU targets (--device)
};

// Every target this build knows, in `kvfuzz targets` order.
std::vector<TargetInfo> list_targets();

// The target named `name`. Throws InputError("", "", ...) naming the known targets for an
// unknown name.
std::unique_ptr<Target> make_target(const std::string& name, const TargetOptions& options = {});

// make_target, then InfraError (exit code 3) when the target cannot run on this machine.
std::unique_ptr<Target> open_target(const std::string& name, const TargetOptions& options = {});

// KvAppendParams of case `c` with pointers into `image` (host or device address of the image's
// first byte); shared by every target that launches kernels/cuda.
struct KvAppendParams;
KvAppendParams append_params(const Case& c, std::byte* image, const ArenaLayout& layout);

}  // namespace kvf
