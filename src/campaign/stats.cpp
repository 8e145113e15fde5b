// stats.cpp — see stats.h.
#include "stats.h"

#include <algorithm>

namespace kvf {

namespace {

const char* count_bucket(int64_t n) { return n == 0 ? "0" : n == 1 ? "1" : "many"; }

bool pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

std::string format_family(const Case& c) {
  if (c.family != Family::kv) return std::string(to_string(c.family));
  switch (c.layout) {
    case Layout::vllm_legacy: return "x_packed";
    case Layout::packed_content_hnd: return "content_packed";
    case Layout::packed_kv_nhd: return "block_packed";
    case Layout::contiguous_bshd:
    case Layout::contiguous_bhsd: return "contiguous";
    case Layout::paged_nhd:
    case Layout::paged_hnd: break;
  }
  return "paged";
}

std::vector<std::string> feature_buckets(const Case& c) {
  std::vector<std::string> b;
  const auto add = [&](const std::string& name, const std::string& value) { b.push_back(name + "=" + value); };
  add("format", format_family(c));
  add("padding", std::string(to_string(c.padding)));
  add("addressing", std::string(to_string(c.addressing)));
  add("window", std::string(to_string(c.window_input)));
  add("quant_format", std::string(to_string(c.quant_format)));
  if (c.has_format() && rule_bits(c.quant_format, c.quant_rules) != 0) {
    const uint32_t bits = rule_bits(c.quant_format, c.quant_rules);
    for (int b = 0; b < kRuleBits; ++b)
      if (bits & (1u << b)) add("convention", std::string(to_string(static_cast<RuleBit>(b))));
  }
  add("context_parallel", std::string(to_string(c.cp_input)));
  if (c.has_cp()) {
    add("cp_world_size", c.cp_world_size == 1 ? "1" : c.cp_world_size <= 4 ? "2..4" : "more");
    add("cp_interleave", c.cp_interleave == 1 ? "1" : c.cp_interleave < c.cache.block_size ? "below_block_size" : "block_size_or_more");
  }
  add("layout", std::string(to_string(c.layout)));
  add("input_dtype", std::string(to_string(c.input_dtype)));
  add("cache_dtype", std::string(to_string(c.cache_dtype)));
  add("slot_dtype", std::string(to_string(c.slot_dtype)));
  add("scale_kind", std::string(to_string(c.scale_kind)));
  add("values", std::string(to_string(c.dist)));
  const int64_t bs = c.cache.block_size;
  add("block_size", bs == 1 ? "1" : pow2(bs) ? "pow2" : "non_pow2");
  add("heads", c.num_heads == 1 ? "1" : c.num_heads % 2 ? "odd" : "even");
  add("head_dim", pow2(c.head_dim) ? "pow2" : "non_pow2");
  int64_t requests = 0, decode = 0, with_context = 0;
  for (const Request& r : c.requests) {
    requests += r.new_len > 0 ? 1 : 0;
    decode += r.new_len == 1 ? 1 : 0;
    with_context += r.new_len > 0 && r.context_len > 0 ? 1 : 0;
  }
  add("requests", count_bucket(requests));
  if (requests > 0 && decode == requests) add("batch", "decode_only");
  if (with_context > 0) add("batch", "appends_to_context");
  int64_t padding = 0, invalid = 0, at_capacity = 0;
  for (int64_t s : c.slot_mapping) {
    padding += c.is_padding(s) ? 1 : 0;
    invalid += s >= c.capacity() ? 1 : 0;
    at_capacity += s == c.capacity() ? 1 : 0;
  }
  add("padding_rows", count_bucket(padding));
  add("invalid_slots", count_bucket(invalid));
  if (at_capacity > 0) add("slot", "equals_capacity");
  if (c.num_input_rows > c.num_slots()) add("graph_rows", "yes");
  if (c.num_q_heads > 0) add("input", "fused_qkv");
  if (c.has_value() && (c.key.stride_token != c.value.stride_token || c.key.stride_head != c.value.stride_head))
    add("kv_views", "distinct_strides");
  const int64_t H = c.num_heads, D = c.head_dim;
  const bool dense_nhd = c.cache.stride_head == D && c.cache.stride_pos == H * D;
  const bool dense_hnd = c.cache.stride_pos == D && c.cache.stride_head == c.cache.block_size * D;
  if (!dense_nhd && !dense_hnd) add("cache_strides", "gapped");
  const int64_t align = std::max<int64_t>(1, 16 / dtype_size(c.cache_dtype));
  if (c.cache_k_offset % align != 0 || c.cache_v_offset % align != 0) add("bases", "misaligned");
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

}  // namespace kvf
