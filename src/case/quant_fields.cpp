// quant_fields.cpp — the typed fields of the quantised formats (quant_format.h, docs/formats.md).
//
// Units. A case with a quantised format keeps its cache geometry (strides, offsets, buffer size) in
// bytes: every format's code dtype is one byte or half of one. Its scale-cache geometry is in
// elements of the format's scale dtype (one byte for e4m3 and e8m0 scales, four for fp32). Each
// field's layout is in elements of its own dtype, so a 4-bit field's offsets and strides count
// nibbles (byte strides times two) and an fp32 field inside the byte buffer counts 4-byte words
// (the validator requires those byte offsets and strides to be multiples of 4).
//
//   nvfp4, mxfp4       codes: geometry in nibbles, dim D:1. scales (scale cache): the scale
//                      geometry, group axis D/G:1, or for an nvfp4 swizzled tensor pos
//                      (4, bs/4):(1, 4P) and group (S/4, 4):(4, P), P its pos stride, S = D/16.
//   mxfp8_e4m3/e5m2    codes: geometry in bytes. scales as mxfp4.
//   asym_int8          codes: geometry in bytes. scale and zero point (scale cache, fp32): the scale
//                      geometry from scale_k_offset (scale) and scale_k_offset + 1 (zero).
//   asym_int4          codes: nibbles, dim D:1 (adjacent pairs) or (D/2, 2):(2, 1) (split_half: dim d
//                      and d + D/2 share a byte). scale and zero as asym_int8.
//   fp8_/int8_inline   codes: geometry in bytes. scale: fp32 at byte D of each (token, head) row.
//   ds_mla             one latent record per slot (H 1): codes of dims 0..511 at bytes 0..511, four
//                      fp32 scales at bytes 512..527, the 64 rope dims in the input's 16-bit dtype at
//                      bytes 528..655 (656 bytes for DeepSeek's 512 + 64; any multiple of 128 + rope).
//   indexer_k          per block: the bs rows of D codes (pos stride D), then bs * D/128 fp32 scales.
#include "case.h"

namespace kvf {

namespace {

// The geometry as a layout from `offset_bytes`, every offset and stride times `scale` / `divide`
// (a field's element units in a byte buffer), `heads` heads, `dims` dims at stride 1.
FieldLayout scaled_layout(const CacheGeometry& g, int64_t offset_bytes, int64_t heads, int64_t dims, int64_t scale, int64_t divide) {
  FieldLayout f;
  f.offset = offset_bytes * scale / divide;
  f.mode[0] = flat_mode(g.num_blocks, g.stride_block * scale / divide);
  f.mode[1] = flat_mode(g.block_size, g.stride_pos * scale / divide);
  f.mode[2] = flat_mode(heads, g.stride_head * scale / divide);
  f.mode[3] = flat_mode(dims, 1);
  return f;
}

// A scale-cache field: the scale geometry (in its elements) from `offset`, `groups` along dim.
FieldLayout scale_cache_layout(const CacheGeometry& g, int64_t offset, int64_t heads, int64_t groups, bool swizzled) {
  FieldLayout f = scaled_layout(g, offset, heads, groups, 1, 1);
  if (!swizzled) return f;
  // vLLM's layout for SM100 readers: scale (t, s) at pos 4 (t / 4) + s / (S / 4) and group
  // 4 (s mod S/4) + t mod 4 of the linear layout (pos stride P, group stride 1).
  const int64_t p = g.stride_pos;
  f.mode[1].rank = 2;
  f.mode[1].extent[0] = 4;
  f.mode[1].stride[0] = 1;
  f.mode[1].extent[1] = g.block_size / 4;
  f.mode[1].stride[1] = 4 * p;
  f.mode[3].rank = 2;
  f.mode[3].extent[0] = groups / 4;
  f.mode[3].stride[0] = 4;
  f.mode[3].extent[1] = 4;
  f.mode[3].stride[1] = p;
  return f;
}

}  // namespace

bool nvfp4_scales_swizzled(const Case& c, bool is_value) {
  return c.quant_format == QuantFormat::nvfp4 &&
         (c.quant_rules.scale_layout == ScaleLayout::swizzled || (is_value && c.quant_rules.scale_layout == ScaleLayout::swizzled_v));
}

CacheFields format_fields(const Case& c) {
  CacheFields out;
  const QuantFormat fmt = c.quant_format;
  const DType code = format_code_dtype(fmt);
  const int64_t H = c.num_heads, D = c.head_dim;
  const bool nibbles = dtype_bits(code) == 4;

  if (fmt == QuantFormat::ds_mla) {  // one record per slot: codes, scales, rope (H 1)
    const int64_t latent = D - c.rope_dim, group = format_group(fmt, D), groups = latent / group;
    CacheField& k = out.add();
    k.name = "latent";
    k.dtype = code;
    k.layout = scaled_layout(c.cache, c.cache_k_offset, H, latent, 1, 1);
    k.num_heads = H;
    k.head_dim = latent;
    k.parts[0] = {c.key, latent};
    k.group = group;
    k.scale = 1;
    CacheField& s = out.add();
    s.name = "latent scale";
    s.role = FieldRole::scale;
    s.dtype = DType::f32;
    s.layout = scaled_layout(c.cache, c.cache_k_offset + latent, H, groups, 1, 4);
    s.num_heads = H;
    s.head_dim = groups;
    s.num_parts = 0;
    s.group = group;
    s.scale = 0;
    CacheField& r = out.add();
    r.name = "rope";
    r.dtype = c.input_dtype;  // copied as the input holds it (f16 or bf16)
    r.layout = scaled_layout(c.cache, c.cache_k_offset + latent + 4 * groups, H, c.rope_dim, 1, 2);
    r.num_heads = H;
    r.head_dim = c.rope_dim;
    r.entry_dim = latent;
    r.parts[0] = {c.rope, c.rope_dim};
    return out;
  }

  for (int t = 0; t < (c.has_value() ? 2 : 1); ++t) {
    const bool is_value = t == 1;
    const int64_t offset = is_value ? c.cache_v_offset : c.cache_k_offset;
    const CacheGeometry& g = is_value ? c.value_geometry() : c.cache;
    const int data = out.count;
    CacheField& d = out.add();
    d.name = is_value ? "V" : "K";
    d.index = t;
    d.dtype = code;
    d.layout = scaled_layout(g, offset, H, D, nibbles ? 2 : 1, 1);
    if (fmt == QuantFormat::asym_int4 && c.quant_rules.int4_pairing == Int4Pairing::split_half) {
      d.layout.mode[3].rank = 2;  // dim d at nibble 2 (d mod D/2) + d / (D/2)
      d.layout.mode[3].extent[0] = D / 2;
      d.layout.mode[3].stride[0] = 2;
      d.layout.mode[3].extent[1] = 2;
      d.layout.mode[3].stride[1] = 1;
    }
    d.num_heads = H;
    d.head_dim = D;
    d.parts[0] = {is_value ? c.value : c.key, D};
    d.group = format_group(fmt, D);
    const int64_t groups = D / d.group;

    CacheField s;
    s.name = is_value ? "V scale" : "K scale";
    s.role = FieldRole::scale;
    s.index = t;
    s.dtype = format_scale_dtype(fmt);
    s.num_heads = H;
    s.head_dim = groups;
    s.num_parts = 0;
    s.group = d.group;
    s.scale = data;
    switch (fmt) {
      case QuantFormat::indexer_k:  // after the block's bs rows of D codes: bs * groups fp32 scales
        out.field[data].layout.mode[1] = flat_mode(g.block_size, D);
        s.layout.offset = (offset + g.block_size * D) / 4;
        s.layout.mode[0] = flat_mode(g.num_blocks, g.stride_block / 4);
        s.layout.mode[1] = flat_mode(g.block_size, groups);
        s.layout.mode[2] = flat_mode(H, groups);
        s.layout.mode[3] = flat_mode(groups, 1);
        break;
      case QuantFormat::fp8_inline:
      case QuantFormat::int8_inline:  // fp32 at byte D of each (token, head) row
        s.layout = scaled_layout(g, offset + D, H, 1, 1, 4);
        break;
      default:  // the scale cache
        s.buffer = FieldBuffer::scale_cache;
        s.layout = scale_cache_layout(c.scale_cache, is_value ? c.scale_v_offset : c.scale_k_offset, H, groups,
                                      nvfp4_scales_swizzled(c, is_value));
        break;
    }
    out.field[data].scale = out.count;
    out.add() = s;
    if (format_has_zero(fmt)) {  // the zero point right after its scale (LMDeploy's [..., 2])
      CacheField z = s;
      z.name = is_value ? "V zero" : "K zero";
      z.role = FieldRole::zero;
      z.layout.offset += 1;
      out.field[data].zero = out.count;
      out.add() = z;
    }
  }
  return out;
}

}  // namespace kvf
