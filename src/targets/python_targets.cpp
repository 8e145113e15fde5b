// python_targets.cpp — the targets that run Python code in a persistent worker (python_worker.h):
//
//   triton-interp                 kernels/triton (kvfuzz_triton) under Triton's CPU interpreter
//   triton-interp-fp8hw           the same with the GPU's fp8 conversion, which the interpreter gets
//                                 wrong: fp8 cache values are checked within one binade
//   python:MODULE:FUNCTION        a user's function on CPU torch tensors (TRITON_INTERPRET=1)
//   python-cuda:MODULE:FUNCTION   the same on CUDA tensors (device --device)
//   python-numpy:MODULE:FUNCTION  the same on numpy arrays (no torch needed)
//
// The Python interpreter is --python, $KVFUZZ_PYTHON or the Triton venv (resolve_python());
// $KVFUZZ_TRITON_PKG selects another copy of the kvfuzz_triton package (mutants).
#include <memory>
#include <string>
#include <utility>

#include "base/errors.h"
#include "python_worker.h"
#include "target.h"

namespace kvf {

namespace {

class PythonTarget final : public Target {
 public:
  PythonTarget(TargetInfo info, PythonWorkerSpec spec) : info_(std::move(info)), spec_(std::move(spec)) {}

  const TargetInfo& info() const override { return info_; }

  // The interpreter starts (and imports the kernel's module) in the kvfuzz worker process before its
  // first case (isolation.h), so no launch's timeout includes it.
  std::string start() override {
    if (!worker_) worker_ = std::make_unique<PythonWorker>(spec_);
    const PythonHello& hello = worker_->start();
    return hello.kind == PythonHello::Kind::ready ? "" : "the Python worker cannot run: " + hello.message;
  }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    if (!worker_) worker_ = std::make_unique<PythonWorker>(spec_);
    return worker_->run(c, image, layout);
  }

  // Starts a worker once per process and asks it (python_worker.h, probe_python_worker()).
  std::string unavailable_reason() const override {
    const PythonHello hello = probe_python_worker(spec_);
    if (hello.kind == PythonHello::Kind::bad_target) throw InputError("--target " + info_.name, "", hello.message);
    return hello.kind == PythonHello::Kind::ready ? "" : hello.message;
  }

  // The triton-interp targets: own_kernel_capabilities() (info_). A function: what it declares
  // (FUNCTION.kvfuzz_capabilities or FUNCTION_capabilities()), from the same probe, with vllm_legacy,
  // the families other than kv, sink padding, CSR, rings, shards and quantised formats only if its
  // declaration lists them (undeclared_python_layouts(), ..., gen/capabilities.h).
  std::optional<Capabilities> capabilities() const override {
    if (spec_.config.value("mode", "") == "launch") return info_.capabilities;
    const PythonHello hello = probe_python_worker(spec_);
    const bool declared = hello.kind == PythonHello::Kind::ready && hello.capabilities;
    Capabilities caps = declared ? *hello.capabilities : Capabilities{};
    if (!declared || !hello.declares_layouts) caps.layouts &= undeclared_python_layouts();
    if (!declared || !hello.declares_families) caps.families &= undeclared_python_families();
    if (!declared || !hello.declares_padding_modes) caps.padding_modes &= undeclared_python_padding_modes();
    if (!declared || !hello.declares_addressings) caps.addressings &= undeclared_python_addressings();
    if (!declared || !hello.declares_windows) caps.windows &= undeclared_python_windows();
    if (!declared || !hello.declares_cp_inputs) caps.cp_inputs &= undeclared_python_cp_inputs();
    if (!declared || !hello.declares_quant_formats) caps.quant_formats &= undeclared_python_quant_formats();
    return caps;
  }

  std::vector<std::string> declared_inputs() const override {
    if (spec_.config.value("mode", "") == "launch") return {};
    const PythonHello hello = probe_python_worker(spec_);
    if (hello.kind == PythonHello::Kind::ready && hello.request_inputs) return {"requests"};
    return {};
  }

 private:
  TargetInfo info_;
  PythonWorkerSpec spec_;
  std::unique_ptr<PythonWorker> worker_;
};

// Triton's interpreter runs each program of the grid in Python, milliseconds apiece: a case of the
// default profile with many slots and heads takes minutes (a 31-slot, 128-head HND case: about a
// minute on a loaded 2-core machine).
constexpr double kInterpreterTimeout = 600;

const char* const kTritonSupports =
    "what kvfuzz_triton implements: every layout (any strides; vllm_legacy through its per-field strides), "
    "every family (kv, kv_split: V's own head dim and strides, k_only, mla: kv_c and k_pe into one latent entry), "
    "f16/bf16/f32 inputs, f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with per-tensor, per-head, per-block and "
    "per-token-head scales, i32/i64 slots, any H and D, context-parallel shards (one call per rank; input "
    "slot_mapping from kvfuzz_triton's slot-mapping producer, input positions filtered in the kernel), every quantised "
    "format (nvfp4, mxfp8_e4m3/e5m2, mxfp4, ds_mla, indexer_k, fp8_inline, int8_inline, asym_int8, asym_int4) under "
    "every convention (kv_append_format.py); slow (the interpreter loops over the grid in Python)";

std::unique_ptr<Target> make_triton_interp(const TargetOptions& options, bool fp8_software) {
  TargetInfo info;
  info.supports = kTritonSupports;
  info.default_timeout_s = kInterpreterTimeout;
  if (fp8_software) {
    info.name = "triton-interp";
    info.summary =
        "kernels/triton (kvfuzz_triton; $KVFUZZ_TRITON_PKG for another copy) under Triton's CPU interpreter "
        "(TRITON_INTERPRET=1), in a persistent Python worker (--python, $KVFUZZ_PYTHON)";
    info.tolerance =
        "exact; fp8 values come from the kernel's exact integer conversion (FP8_SOFTWARE=1, launch()'s choice "
        "under the interpreter); the hardware conversion the GPU runs is not checked here (triton-interp-fp8hw)";
  } else {
    info.name = "triton-interp-fp8hw";
    info.summary =
        "triton-interp with the fp8 conversion the GPU runs (FP8_SOFTWARE=0: clamp, then a round-to-nearest-even "
        "cast), which Triton's interpreter computes wrongly (it loses the mantissa carry: 1.95 -> 1.0, one binade low)";
    // Not written-any-value: in a 1-byte format the interpreter's wrong code can equal the cell's
    // pre-run byte, which written-any-value must call a missing write (interp-quant seed 5 case 137:
    // expected 0xa2, the interpreter stored 0xa3, the pre-run value). One binade is the interpreter's
    // error bound (research/triton-tooling.md §2.4), and what campaigns under exact show: max 8 ulp
    // in e4m3, 4 in e5m2.
    info.tolerance =
        "exact, except the values of fp8 caches: within one binade (ulp:8 in fp8_e4m3, ulp:4 in fp8_e5m2), the error of "
        "the interpreter's fp8 cast; every location, every scale and every f16/bf16/f32/int8 value stays exact";
    info.default_tolerance = "exact,fp8_e4m3=ulp:8,fp8_e5m2=ulp:4";
    // The quantised formats whose scales or codes pass through an fp8 conversion would inherit the
    // interpreter's wrong cast in a scale (every code of its group then differs): only those without
    // one (mxfp4: e2m1 and e8m0 from the bits; int8_inline; the asymmetric formats).
    Capabilities caps;
    caps.quant_formats = 0;
    for (const QuantFormat f : {QuantFormat::none, QuantFormat::mxfp4, QuantFormat::int8_inline, QuantFormat::asym_int8,
                                QuantFormat::asym_int4})
      caps.quant_formats |= 1u << static_cast<unsigned>(f);
    info.capabilities = caps;
  }
  PythonWorkerSpec spec;
  spec.python = resolve_python(options.python);
  spec.config = {{"mode", "launch"},
                 {"fp8_software", fp8_software},
                 {"triton_pkg", triton_pkg_override()},
                 {"default_pkg", triton_pkg_override().empty() ? default_triton_pkg() : ""}};
  spec.interpret = true;
  return std::make_unique<PythonTarget>(std::move(info), std::move(spec));
}

// "MODULE:FUNCTION" -> (MODULE, FUNCTION), split at the last colon.
std::pair<std::string, std::string> module_function(const std::string& prefix, const std::string& argument) {
  const size_t colon = argument.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == argument.size())
    throw InputError("--target " + prefix + argument, "",
                     "expected " + prefix + "MODULE:FUNCTION (MODULE an importable name or a .py file), e.g. " + prefix +
                         "kvfuzz_triton.api:kv_append");
  return {argument.substr(0, colon), argument.substr(colon + 1)};
}

enum class Convention : uint8_t { torch_cpu, torch_cuda, numpy };

std::unique_ptr<Target> make_python_call(const std::string& argument, const TargetOptions& options, Convention convention) {
  const std::string prefix = convention == Convention::torch_cpu    ? "python:"
                             : convention == Convention::torch_cuda ? "python-cuda:"
                                                                    : "python-numpy:";
  const auto [module, function] = module_function(prefix, argument);
  TargetInfo info;
  info.name = prefix + argument;
  const char* tensors = convention == Convention::torch_cpu    ? "CPU torch tensors (TRITON_INTERPRET=1)"
                        : convention == Convention::torch_cuda ? "CUDA torch tensors on --device"
                                                               : "numpy arrays (bf16 as uint16, fp8 as uint8 bits)";
  info.summary = function + " of " + module + " called with " + tensors + " viewing the arena, in a persistent Python worker";
  info.supports =
      "whatever the function accepts: fn(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind, "
      "k_scale, v_scale, k_scale_cache, v_scale_cache, invalid_slots" +
      std::string(convention == Convention::numpy ? ", input_dtype, cache_dtype" : "") +
      "), the convention of kvfuzz_triton.api.kv_append; a Python exception is a launch_error; cases inside "
      "FUNCTION.kvfuzz_capabilities or FUNCTION_capabilities() if the module declares them, vllm_legacy (layout "
      "\"vllm_legacy\": K [nb, H, D/x, bs, x], V [nb, H, D, bs]) only if its declared layouts list it, the "
      "families kv_split (value [T, H, Dv], value_cache with its own strides), k_only (value, value_cache None) and "
      "mla (key = kv_c [T, D_c], key_cache [nb, bs, D], rope=k_pe [T, rope_dim], value, value_cache None) only if "
      "its declared families list them, context-parallel shards (one call per rank on the rank's shard) only if its "
      "declared cp_inputs list them (slot_mapping: the rank's own, from kvfuzz's formula; positions: cp_positions, "
      "cp_rank, cp_world_size, cp_interleave), CSR addressing (slot_mapping None; batch_indices, positions, kv_indices, "
      "kv_indptr, kv_last_page_len) only if its declared addressings list csr, rings only if its declared windows list "
      "them (positions: window_positions, window_seq_lens, window_size, window_sinks), quantised formats (key_cache, "
      "value_cache None; quant_format, quant_rules, format_cache, format_scales, format_fields) only if its declared "
      "quant_formats list them, and the request structure (batch_indices, positions, seq_lens, context_lens, "
      "block_tables) if its declared inputs list requests (docs/targets.md)";
  info.tolerance = "exact (--tolerance for a kernel with another rounding or scale convention)";
  info.needs_gpu = convention == Convention::torch_cuda;
  info.capabilities = std::nullopt;  // the function's declaration, read by capabilities()
  // On the CPU the function may well run Triton's interpreter; on the GPU the first case of each
  // specialisation includes the JIT compile, and the first case of all the imports.
  info.default_timeout_s = convention == Convention::torch_cuda ? 300 : kInterpreterTimeout;
  PythonWorkerSpec spec;
  spec.python = resolve_python(options.python);
  spec.config = {{"mode", "call"},
                 {"module", module},
                 {"function", function},
                 {"convention", convention == Convention::numpy ? "numpy" : "torch"},
                 {"device", convention == Convention::torch_cuda ? "cuda:" + std::to_string(options.device) : "cpu"},
                 {"triton_pkg", triton_pkg_override()},
                 {"default_pkg", default_triton_pkg()}};
  spec.interpret = convention != Convention::torch_cuda;
  return std::make_unique<PythonTarget>(std::move(info), std::move(spec));
}

}  // namespace

std::unique_ptr<Target> make_triton_interp_target(const TargetOptions& options) { return make_triton_interp(options, true); }

std::unique_ptr<Target> make_triton_interp_fp8hw_target(const TargetOptions& options) {
  return make_triton_interp(options, false);
}

std::unique_ptr<Target> make_python_target(const std::string& argument, const TargetOptions& options) {
  return make_python_call(argument, options, Convention::torch_cpu);
}

std::unique_ptr<Target> make_python_cuda_target(const std::string& argument, const TargetOptions& options) {
  return make_python_call(argument, options, Convention::torch_cuda);
}

std::unique_ptr<Target> make_python_numpy_target(const std::string& argument, const TargetOptions& options) {
  return make_python_call(argument, options, Convention::numpy);
}

}  // namespace kvf
