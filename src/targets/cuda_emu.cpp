// cuda_emu.cpp — the cuda-emu target: kernels/cuda/kv_append.cuh's body run on the CPU by the grid
// emulator (kv_append_emu.cpp). This is how machines without a GPU exercise the real kernel's index
// arithmetic, dispatch and conversions.
#include <cstring>
#include <string>

#include "case/context_parallel.h"
#include "case/csr.h"
#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"
#include "kv_append.h"
#include "target.h"

namespace kvf {

namespace {

static_assert(static_cast<int>(QuantFormat::asym_int4) == static_cast<int>(QuantFormat::asym_int4) &&
              static_cast<int>(QuantFormat::nvfp4) == static_cast<int>(QuantFormat::nvfp4));

// A field's layout as the call addressing shard `shard` (its first block) sees it: offset to the
// shard's first block, the shard's blocks.
FieldLayout shard_layout(const Case& c, FieldLayout f, int64_t shard) {
  f.offset += shard * f.mode[0].stride[0];
  f.mode[0].extent[0] = c.shard_blocks();
  return f;
}

// The quantised format's part of a call (kv_append.cuh): its fields' layouts and buffers.
void format_params(const Case& c, std::byte* image, const ArenaLayout& layout, int64_t shard, KvAppendParams& p) {
  p.quant_format = c.quant_format;
  const QuantRules& r = c.quant_rules;
  p.format_rules = FormatRules{static_cast<uint8_t>(r.nvfp4), static_cast<uint8_t>(r.mx), static_cast<uint8_t>(r.ds_mla),
                               static_cast<uint8_t>(r.indexer), static_cast<uint8_t>(r.asym_arith), static_cast<uint8_t>(r.asym_lanes),
                               static_cast<uint8_t>(r.int4_pairing)};
  p.format_cache = image + layout.cache_begin;
  p.format_scales = image + (format_scales_in_cache(c.quant_format) ? layout.cache_begin : layout.scale_cache_begin);
  p.k_cache = p.v_cache = nullptr;
  p.k_scale_cache = p.v_scale_cache = nullptr;
  for (const CacheField& f : c.fields()) {
    const FieldLayout l = shard_layout(c, f.layout, shard);
    if (f.role == FieldRole::data && f.group == 0) {
      p.rope_layout = l;  // ds_mla's rope dims
      continue;
    }
    switch (f.role) {
      case FieldRole::data:
        p.code_layout[f.index] = l;
        p.format_group = static_cast<int32_t>(f.group);
        break;
      case FieldRole::scale: p.scale_layout[f.index] = l; break;
      case FieldRole::zero: p.zero_layout[f.index] = l; break;
    }
  }
  if (c.quant_format == QuantFormat::ds_mla) p.latent_dim = static_cast<int32_t>(c.head_dim - c.rope_dim);
}

}  // namespace

KvAppendParams append_params(const Case& c, std::byte* image, const ArenaLayout& layout, int64_t rank) {
  const int64_t in_size = dtype_size(c.input_dtype);
  const int64_t cache_size = dtype_size(c.cache_dtype);
  std::byte* input = image + layout.input_begin;
  std::byte* cache = image + layout.cache_begin;
  if (!c.has_cp()) rank = 0;
  const int64_t shard = rank * c.shard_blocks();  // the rank's first block in the case's cache
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
  } else if (c.cp_input == CpInput::slot_mapping) {  // the rank's own slot_mapping (case/context_parallel.h)
    p.slot_mapping = reinterpret_cast<int32_t*>(image + layout.slots_begin) + cp_section(c).rank_mappings + rank * c.num_slots();
  } else {
    p.slot_mapping = image + layout.slots_begin;
  }
  if (c.cp_input == CpInput::positions) {  // global positions after slot_mapping; the kernel keeps its rank's rows
    p.cp_positions = reinterpret_cast<const int32_t*>(image + layout.slots_begin) + cp_section(c).positions;
    p.cp_rank = static_cast<int32_t>(rank);
    p.cp_world_size = static_cast<int32_t>(c.cp_world_size);
    p.cp_interleave = static_cast<int32_t>(c.cp_interleave);
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
  p.k_cache = cache + (c.cache_k_offset + shard * c.cache.stride_block) * cache_size;
  if (c.has_value()) p.v_cache = cache + (c.cache_v_offset + shard * c.value_geometry().stride_block) * cache_size;
  p.cache = c.cache;
  p.cache.num_blocks = c.shard_blocks();
  p.vllm_legacy = c.layout == Layout::vllm_legacy;
  p.has_value = c.has_value();
  if (c.family == Family::kv_split) {
    p.value_head_dim = c.value_head_dim;
    p.value_cache = c.value_geometry();
    p.value_cache.num_blocks = c.shard_blocks();
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
    const int64_t first = c.scale_kind == ScaleKind::per_block ? shard * c.num_heads : 0;  // the shard's blocks' scales
    p.k_scale = scales + first;
    if (c.has_value()) p.v_scale = scales + num_scales + first;
  }
  if (c.scale_kind == ScaleKind::per_token_head) {
    const int64_t first = shard * c.scale_cache.stride_block;
    p.k_scale_cache = scale_cache + c.scale_k_offset + first;
    if (c.has_value()) p.v_scale_cache = scale_cache + c.scale_v_offset + first;
    p.scale_cache = c.scale_cache;
    p.scale_cache.num_blocks = c.shard_blocks();
  }
  if (c.has_format()) format_params(c, image, layout, shard, p);
  return p;
}

CpSlotMappingParams cp_producer_params(const Case& c, std::byte* image, const ArenaLayout& layout, int64_t rank) {
  const CpSection s = cp_section(c);
  auto* base = reinterpret_cast<int32_t*>(image + layout.slots_begin);
  CpSlotMappingParams p;
  p.positions = base + s.positions;
  p.requests = base + s.requests;
  p.block_tables = base + s.tables;
  p.table_width = s.table_width;
  p.num_rows = c.num_slots();
  p.block_size = c.cache.block_size;
  p.rank = static_cast<int32_t>(rank);
  p.world_size = static_cast<int32_t>(c.cp_world_size);
  p.interleave = static_cast<int32_t>(c.cp_interleave);
  p.slot_mapping = base + s.rank_mappings + rank * c.num_slots();
  return p;
}

void write_reference_slot_mappings(const Case& c, std::byte* image, const ArenaLayout& layout) {
  if (c.cp_input != CpInput::slot_mapping) return;
  const CpRows rows = cp_rows(c);
  const CpSection s = cp_section(c);
  for (int64_t r = 0; r < c.cp_world_size; ++r) {
    const std::vector<int32_t> m = rank_slot_mapping(c, rows, r);
    std::memcpy(image + layout.slots_begin + (s.rank_mappings + r * c.num_slots()) * 4, m.data(), m.size() * 4);
  }
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

  // One call per rank (one for a case without shards); a rank of a context-parallel case with input
  // slot_mapping first runs the kernel's slot-mapping producer for its slot_mapping.
  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      if (c.cp_input == CpInput::slot_mapping) cp_slot_mapping_emu(cp_producer_params(c, image, layout, rank));
      switch (kv_append_emu(append_params(c, image, layout, rank))) {
        case LaunchStatus::ok: continue;
        case LaunchStatus::unsupported_dtype:
          return {RunStatus::launch_error, "kernel has no specialisation for " +
                                               std::string(to_string(c.input_dtype)) + " -> " +
                                               std::string(to_string(c.cache_dtype))};
        case LaunchStatus::launch_error: break;
      }
      return {RunStatus::launch_error, "launch failed"};
    }
    return {};
  }

 private:
  TargetInfo info_{
      "cuda-emu",
      "kernels/cuda/kv_append.cuh compiled for the host and run by a CPU grid emulator",
      "all layouts (any strides; vllm_legacy element by element), every family (kv, kv_split, k_only, mla), f16/bf16/f32 inputs, f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with "
      "per-tensor, per-head, per-block and per-token-head scales, the quantised formats nvfp4, mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, "
      "indexer_k, fp8_inline and int8_inline under every convention of theirs (not asym_int8, asym_int4), i32/i64 slots, any H and D",
      "exact",
      false,
      "exact",
      30,
      cuda_kernel_capabilities(),
  };
};

}  // namespace

std::unique_ptr<Target> make_cuda_emu_target(const TargetOptions&) { return std::make_unique<CudaEmuTarget>(); }

}  // namespace kvf
