// cuda_emu.cpp — the cuda-emu target: kernels/cuda/kv_append.cuh's body run on the CPU by the grid
// emulator (kv_append_emu.cpp). This is how machines without a GPU exercise the real kernel's index
// arithmetic, dispatch and conversions.
#include <cstring>
#include <string>

#include "case/csr.h"
#include "kv_append.cuh"
#include "kv_append.h"
#include "targets/target.h"

namespace kvf {

KvAppendParams append_params(const Case& c, std::byte* image, const ArenaLayout& layout) {
  const int64_t in_size = dtype_size(c.input_dtype);
  const int64_t cache_size = dtype_size(c.cache_dtype);
  std::byte* input = image + layout.input_begin;
  std::byte* cache = image + layout.cache_begin;
  KvAppendParams p;
  p.key = input + c.key.offset * in_size;
  if (c.has_value()) p.value = input + c.value.offset * in_size;
  p.key_stride_token = c.key.stride_token;
  p.key_stride_head = c.key.stride_head;
  p.value_stride_token = c.value.stride_token;
  p.value_stride_head = c.value.stride_head;
  if (c.addressing == Addressing::csr) {  // the slots section holds the CSR arrays (case/csr.h)
    const CsrArrays csr = csr_arrays(c);
    const auto* base = reinterpret_cast<const int32_t*>(image + layout.slots_begin);
    p.csr_batch_indices = base;
    p.csr_positions = base + csr.positions_at();
    p.csr_kv_indptr = base + csr.kv_indptr_at();
    p.csr_kv_last_page_len = base + csr.kv_last_page_len_at();
    p.csr_kv_indices = base + csr.kv_indices_at();
    p.csr_batch_size = static_cast<int32_t>(c.requests.size());
  } else {
    p.slot_mapping = image + layout.slots_begin;
  }
  if (c.window_input == WindowInput::positions) {  // int32 rows after slot_mapping (arena.cpp)
    const auto* rows = reinterpret_cast<const int32_t*>(image + layout.slots_begin) + c.num_slots();
    p.window_positions = rows;
    p.window_seq_lens = rows + c.num_slots();
    p.window_size = c.window_size;
    p.window_sinks = c.window_sinks;
  }
  p.slot_type = c.slot_dtype;
  p.num_slots = c.num_slots();
  p.num_input_rows = c.num_input_rows;
  p.k_cache = cache + c.cache_k_offset * cache_size;
  if (c.has_value()) p.v_cache = cache + c.cache_v_offset * cache_size;
  p.cache = c.cache;
  p.vllm_legacy = c.layout == Layout::vllm_legacy;
  p.has_value = c.has_value();
  if (c.family == Family::kv_split) {
    p.value_head_dim = c.value_head_dim;
    p.value_cache = c.value_geometry();
  }
  if (c.rope_dim > 0) {
    p.rope = input + c.rope.offset * in_size;
    p.rope_stride_token = c.rope.stride_token;
    p.rope_stride_head = c.rope.stride_head;
    p.rope_dim = c.rope_dim;
  }
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.input_dtype = c.input_dtype;
  p.cache_dtype = c.cache_dtype;
  p.invalid_slots = reinterpret_cast<unsigned long long*>(image + layout.counter_begin);
  p.scale_kind = c.scale_kind;
  const int64_t num_scales = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  float* scales = reinterpret_cast<float*>(image + layout.scales_begin);
  float* scale_cache = reinterpret_cast<float*>(image + layout.scale_cache_begin);
  if (num_scales > 0) {
    p.k_scale = scales;
    if (c.has_value()) p.v_scale = scales + num_scales;
  }
  if (c.scale_kind == ScaleKind::per_token_head) {
    p.k_scale_cache = scale_cache + c.scale_k_offset;
    if (c.has_value()) p.v_scale_cache = scale_cache + c.scale_v_offset;
    p.scale_cache = c.scale_cache;
  }
  return p;
}

void add_invalid_slot_count(const Case& c, std::byte* image, const ArenaLayout& layout) {
  unsigned long long count = 0;
  for (int64_t s : c.slot_mapping) count += s >= c.capacity() ? 1 : 0;
  unsigned long long value = 0;
  std::memcpy(&value, image + layout.counter_begin, sizeof value);
  value += count;
  std::memcpy(image + layout.counter_begin, &value, sizeof value);
}

namespace {

class CudaEmuTarget final : public Target {
 public:
  const TargetInfo& info() const override { return info_; }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    switch (kv_append_emu(append_params(c, image, layout))) {
      case LaunchStatus::ok: return {};
      case LaunchStatus::unsupported_dtype:
        return {RunStatus::launch_error, "kernel has no specialisation for " +
                                             std::string(to_string(c.input_dtype)) + " -> " +
                                             std::string(to_string(c.cache_dtype))};
      case LaunchStatus::launch_error: break;
    }
    return {RunStatus::launch_error, "launch failed"};
  }

 private:
  TargetInfo info_{
      "cuda-emu",
      "kernels/cuda/kv_append.cuh compiled for the host and run by a CPU grid emulator",
      "all layouts (any strides; vllm_legacy element by element), every family (kv, kv_split, k_only, mla), f16/bf16/f32 inputs, f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with "
      "per-tensor, per-head, per-block and per-token-head scales, i32/i64 slots, any H and D",
      "exact",
      false,
  };
};

}  // namespace

std::unique_ptr<Target> make_cuda_emu_target(const TargetOptions&) { return std::make_unique<CudaEmuTarget>(); }

}  // namespace kvf
