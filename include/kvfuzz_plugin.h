/* kvfuzz_plugin.h — the C ABI through which kvfuzz fuzzes a KV-cache append kernel it did not build.
 *
 * A plugin is a shared object exporting the three functions at the end of this file. kvfuzz
 * (`--target plugin:PATH.so`) loads it inside its isolated worker process, asks what the kernel
 * supports (kvfuzz_plugin_query), and for every case calls kvfuzz_plugin_append() once with
 * pointers into a canary-guarded arena: host pointers for a host plugin, device pointers for a
 * device plugin. After the call returns, kvfuzz synchronises the device (device plugins) and
 * compares the whole arena with its golden model. A plugin that crashes, faults the GPU or hangs
 * is a finding; the worker is replaced and the campaign goes on.
 *
 * The contract the kernel must implement is kvfuzz's (docs/contract.md, "The append contract"):
 * for every entry t of slot_mapping with 0 <= slot < num_blocks * block_size, rows key[t] and
 * value[t] ([num_heads, head_dim]) are written to the cache slot, converted to the cache dtype;
 * slot < 0 is padding and is skipped; slot >= capacity is never written and, when invalid_slots
 * is not NULL, counted there; no other byte changes. Element (block b, position o, head h, dim d)
 * of a cache tensor is at  base + b*stride_block + o*stride_pos + h*stride_head + d  (elements,
 * 64-bit arithmetic). Input row t, head h, dim d is at  base + t*stride_token + h*stride_head + d.
 *
 * Versioning: KVFUZZ_PLUGIN_ABI_VERSION changes whenever the ABI gains what a kernel must know;
 * kvfuzz loads plugins of version 1 and 2 and refuses others. Version 2 is version 1 with the format
 * families appended (kvfz_family, kvfz_capabilities.families, the kvfz_append_args fields from
 * `family` on); a version 1 plugin, or one whose families are 0, is sent family KV only, which is
 * every case version 1 could describe. Appended within v2: the padding convention (kvfz_padding,
 * kvfz_capabilities.padding_modes, kvfz_append_args.padding; a plugin that declares none is sent
 * negative padding only) and the addressing (kvfz_addressing: slot_mapping or FlashInfer's CSR;
 * kvfz_capabilities.addressings, kvfz_append_args.addressing and the CSR arrays; a plugin that
 * declares none is sent slot_mapping cases only), ring caches (kvfz_window, kvfz_capabilities.windows,
 * the kvfz_append_args fields from `window` on; a plugin that declares none is sent no ring) and
 * context-parallel shards (kvfz_cp_input, kvfz_capabilities.cp_inputs, the kvfz_append_args fields
 * from `cp_input` on and the optional producer kvfuzz_plugin_cp_slot_mapping; a plugin that declares
 * none is sent no shards) and the quantised formats (kvfz_quant_format, kvfz_quant_rule, the dtypes
 * from KVFZ_FP4_E2M1 on, kvfz_field, kvfz_capabilities.quant_formats and quant_rules, the
 * kvfz_append_args fields from `quant_format` on; a plugin that declares none is sent the classic
 * caches only). Structs carry
 * their size in struct_size so that fields can be appended within a version: kvfuzz zero-fills the
 * structs it passes and sets struct_size to the size it was compiled with, so a field a plugin does
 * not know stays 0 (which always means "as before"), and a plugin writes an appended field only when
 * KVFZ_HAS_FIELD(caps, kvfz_capabilities, field) says the kvfuzz calling it knows it. Appended in v1:
 * kvfz_capabilities.head_dims (discrete head-dim sets) and the KVFZ_APPEND_SKIP return code.
 *
 * Everything here is plain C (C99); the header includes only <stddef.h> and <stdint.h>.
 */
#ifndef KVFUZZ_PLUGIN_H
#define KVFUZZ_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVFUZZ_PLUGIN_ABI_VERSION 2u

/* Nonzero when the struct at `s` (which has a struct_size field) is large enough to hold `field` of
 * struct `type`: use it before writing a field appended after the struct's first version. */
#define KVFZ_HAS_FIELD(s, type, field) ((s)->struct_size >= offsetof(type, field) + sizeof((s)->field))

/* kvfuzz_plugin_append's return for "this kernel does not support this case, skip it": not a
 * finding. kvfuzz counts the case as skipped, by the reason written into error (run, replay and
 * shrink summaries), and during shrinking a candidate the plugin skips is not taken. Declare what
 * you can in kvfz_capabilities instead (kvfuzz then never sends such cases, and draws a supported
 * one in their place); a skip is for what the capabilities cannot express. 77 is the skip code of
 * the automake and ctest conventions. Every other nonzero return is a refusal (`launch_error`). */
#define KVFZ_APPEND_SKIP 77

/* Entries of kvfz_capabilities.head_dims. */
#define KVFZ_MAX_HEAD_DIMS 16
#define KVFZ_MAX_ROPE_DIMS 4

/* Every `typedef enum` below whose values kvfuzz itself names (families, serving modes, dtypes, scale
 * kinds, layouts, quantised formats) is written by kvfuzz's scripts/gen-enums.py from kernels/enums.json,
 * the one table its C++, CUDA and Python spellings come from too; the comments around them are not. */

/* Which fields the cache stores (ABI v2). KV: K and V [.., H, D] of one geometry (v1). KV_SPLIT: V
 * [.., H, value_head_dim] with its own strides (value_cache). K_ONLY: no V (value, v_cache NULL).
 * MLA: one latent entry per slot, H = 1, head_dim = kv_c's dims + rope_dim: dims [0, head_dim -
 * rope_dim) from key (kv_c), the last rope_dim from rope (k_pe); no V. */
typedef enum kvfz_family {
  KVFZ_FAMILY_KV = 0,
  KVFZ_FAMILY_KV_SPLIT = 1,
  KVFZ_FAMILY_K_ONLY = 2,
  KVFZ_FAMILY_MLA = 3
} kvfz_family;

/* What the padding rows of slot_mapping carry (appended in v2 with the serving conventions).
 * NEGATIVE: a negative slot, never written (the contract above). SINK: slot 0, which no request
 * owns (block 0 is in no block table): the kernel may write padding rows there, and slot 0's
 * contents after the call are unconstrained (SGLang's reserved padding slot). */
typedef enum kvfz_padding { KVFZ_PADDING_NEGATIVE = 0, KVFZ_PADDING_SINK = 1 } kvfz_padding;

/* How the call addresses the cache (appended in v2 with the serving conventions). SLOT_MAPPING:
 * slot_mapping (the contract above). CSR: FlashInfer's append_paged_kv_cache convention, no
 * slot_mapping (NULL): row t is the token at position positions[t] of request batch_indices[t];
 * request b's pages are kv_indices[kv_indptr[b] .. kv_indptr[b + 1]) (its whole sequence after this
 * call, context and new tokens, and no more), its last page holding kv_last_page_len[b] tokens
 * (0 for an empty request); the token goes to page kv_indices[kv_indptr[b] + positions[t] /
 * block_size], offset positions[t] % block_size. A CSR call has no padding and no invalid rows
 * (num_slots rows, every one written); rows >= num_slots of key and value are still never read. */
typedef enum kvfz_addressing { KVFZ_ADDRESSING_SLOT_MAPPING = 0, KVFZ_ADDRESSING_CSR = 1 } kvfz_addressing;

/* Sliding-window ring caches (appended in v2 with the serving conventions). A request keeps
 * window_sinks sink positions and a window of window_size - window_sinks further ones: position p
 * lives at ring index p (p < sinks) or sinks + (p - sinks) mod (size - sinks) of its pages, and a
 * token of this call that is already outside the window (p >= sinks and p < len - (size - sinks),
 * len its request's length after the call) is not written. NONE: no window (the contract above).
 * SLOT_MAPPING: slot_mapping already holds -1 for such tokens and each other token's ring slot; the
 * kernel follows slot_mapping as always. POSITIONS: every token's slot_mapping entry is its ring
 * slot (an evicted token shares it with a later one), window_positions[t] is row t's position and
 * window_seq_lens[t] its request's length (int32; -1 and 0 for padding and invalid rows), and the
 * kernel skips the evicted tokens itself. */
typedef enum kvfz_window {
  KVFZ_WINDOW_NONE = 0,
  KVFZ_WINDOW_SLOT_MAPPING = 1,
  KVFZ_WINDOW_POSITIONS = 2
} kvfz_window;

/* Context-parallel shards (appended in v2 with the serving conventions). world_size ranks with
 * interleave I each hold a shard of every request: global position p belongs to rank (p / I) %
 * world_size, at local position (p / (I * world_size)) * I + p % I of that rank's shard, in page
 * table[local / block_size] of the rank's own cache (every rank reads the same block tables). kvfuzz
 * calls kvfuzz_plugin_append once per rank, each time with that rank's cache (k_cache, v_cache,
 * scale caches and per-block scales of its shard; cache.num_blocks the shard's). NONE: no shards
 * (the contract above). SLOT_MAPPING: slot_mapping is the rank's own, -1 for every token another
 * rank holds; the call is a plain append. POSITIONS: slot_mapping holds every token's local slot
 * (the same on every rank), cp_positions[t] is row t's global position (int32, -1 for padding), and
 * the kernel writes only the rows of rank cp_rank. A plugin may also export
 * kvfuzz_plugin_cp_slot_mapping (below), its slot-mapping producer, which kvfuzz then runs and
 * checks before each rank's SLOT_MAPPING call. */
typedef enum kvfz_cp_input {
  KVFZ_CP_NONE = 0,
  KVFZ_CP_SLOT_MAPPING = 1,
  KVFZ_CP_POSITIONS = 2
} kvfz_cp_input;

/* Element types. Inputs are F16/BF16/F32; caches may also be FP8_E4M3, FP8_E5M2 or INT8
 * (quantised: scale_kind != KVFZ_SCALE_NONE). The quantised formats' fields (appended in v2, see
 * kvfz_quant_format) add FP4_E2M1 and UINT4 (4-bit codes, two per byte, element 2j in the low
 * nibble of byte j), FP8_E8M0 (power-of-two scales 2^(code - 127); 0xFF is NaN) and UINT8. */
typedef enum kvfz_dtype {
  KVFZ_F16 = 0,
  KVFZ_BF16 = 1,
  KVFZ_F32 = 2,
  KVFZ_FP8_E4M3 = 3,
  KVFZ_FP8_E5M2 = 4,
  KVFZ_INT8 = 5,
  KVFZ_FP4_E2M1 = 6,
  KVFZ_FP8_E8M0 = 7,
  KVFZ_UINT8 = 8,
  KVFZ_UINT4 = 9
} kvfz_dtype;

/* Element type of slot_mapping. */
typedef enum kvfz_index_type { KVFZ_I32 = 0, KVFZ_I64 = 1 } kvfz_index_type;

/* Where the scales of a quantised cache come from; stored value = convert(x / scale) with IEEE
 * fp32 division, round to nearest even, saturation (fp8 to +-max finite, int8 to [-128, 127]). */
typedef enum kvfz_scale_kind {
  KVFZ_SCALE_NONE = 0,           /* float cache */
  KVFZ_SCALE_PER_TENSOR = 1,     /* k_scale[0], v_scale[0] */
  KVFZ_SCALE_PER_HEAD = 2,       /* k_scale[h] */
  KVFZ_SCALE_PER_BLOCK = 3,      /* k_scale[b * num_heads + h], b = the slot's physical block */
  KVFZ_SCALE_PER_TOKEN_HEAD = 4  /* dynamic: scale = max(amax over the row's head_dim values, NaN ignored,
                                  * 1e-6f) / QMAX, written to the scale cache at (b, o, h) = scale_base +
                                  * b*stride_block + o*stride_pos + h*stride_head */
} kvfz_scale_kind;

/* Cache layouts kvfuzz generates. The name is informational: the geometry (strides) below is all
 * a kernel needs. Used as bits (1u << layout) in kvfz_capabilities.layouts. */
typedef enum kvfz_layout {
  KVFZ_LAYOUT_PAGED_NHD = 0,          /* [num_blocks, block_size, H, D] */
  KVFZ_LAYOUT_PAGED_HND = 1,          /* [num_blocks, H, block_size, D] */
  KVFZ_LAYOUT_CONTIGUOUS_BSHD = 2,    /* [B, S, H, D]: block = sequence */
  KVFZ_LAYOUT_CONTIGUOUS_BHSD = 3,    /* [B, H, S, D] */
  KVFZ_LAYOUT_PACKED_KV_NHD = 4,      /* [num_blocks, 2, block_size, H, D]: K and V of a block adjacent */
  KVFZ_LAYOUT_PACKED_CONTENT_HND = 5, /* [num_blocks, H, block_size, 2*D]: K the first D of a row, V the last
                                       * D */
  KVFZ_LAYOUT_VLLM_LEGACY = 6         /* vLLM's legacy caches: K [num_blocks, H, D/x, block_size, x] with x =
                                       * 16 bytes of cache elements, V [num_blocks, H, D, block_size].
                                       * cache.stride_block and cache.stride_head are both tensors' (in
                                       * elements); within a head K is dense [D/x, block_size, x] and V dense
                                       * [D, block_size]; cache.stride_pos is x. */
} kvfz_layout;

/* Quantised formats (appended in v2; docs/quant-formats.md, the formulas in kvfuzz's
 * src/golden/block_quant.h). A format call stores typed fields (kvfz_field) in two byte buffers,
 * format_cache and format_scale_cache: codes, their scales (and zero points), each group of
 * `quant_group` dims of a (token, head) row under one scale the kernel computes from the group's
 * amax (max |x|, NaN ignored). NONE: the classic caches (everything before `quant_format`).
 *   NVFP4        e2m1 codes two per byte, an e4m3 scale per 16 dims (scale cache, linear or vLLM's
 *                4x4-swizzled layout, as the field's layout says), under an fp32 global (decode)
 *                scale per tensor: k_scale[0], v_scale[0] (scale_kind PER_TENSOR)
 *   MXFP8_E4M3, MXFP8_E5M2, MXFP4
 *                OCP MX: fp8 or e2m1 codes, an e8m0 scale per 32 dims (scale cache)
 *   DS_MLA       DeepSeek's fp8_ds_mla record (family MLA, H 1): e4m3 codes of the latent dims, an
 *                fp32 scale per 128 of them, the rope dims copied in the input dtype (16-bit)
 *   INDEXER_K    DeepSeek V3.2's indexer keys (family K_ONLY, H 1): per block all e4m3 codes, then
 *                all fp32 scales (one per 128 dims)
 *   FP8_INLINE, INT8_INLINE
 *                per-token-head fp8 e4m3 / int8 codes with the row's fp32 scale right after them
 *   ASYM_INT8, ASYM_INT4
 *                LMDeploy's asymmetric uint8 / uint4 codes with an fp32 scale and zero point per
 *                (token, head) (scale cache). Bits 1u << value in kvfz_capabilities.quant_formats. */
typedef enum kvfz_quant_format {
  KVFZ_QUANT_NONE = 0,
  KVFZ_QUANT_NVFP4 = 1,
  KVFZ_QUANT_MXFP8_E4M3 = 2,
  KVFZ_QUANT_MXFP8_E5M2 = 3,
  KVFZ_QUANT_MXFP4 = 4,
  KVFZ_QUANT_DS_MLA = 5,
  KVFZ_QUANT_INDEXER_K = 6,
  KVFZ_QUANT_FP8_INLINE = 7,
  KVFZ_QUANT_INT8_INLINE = 8,
  KVFZ_QUANT_ASYM_INT8 = 9,
  KVFZ_QUANT_ASYM_INT4 = 10
} kvfz_quant_format;

/* The conventions of the quantised formats where implementations disagree (appended in v2; each
 * formula in kvfuzz's src/golden/block_quant.h). A call's quant_rules holds the bits (1u << value)
 * of the conventions its format reads, one per group below; kvfz_capabilities.quant_rules those a
 * kernel follows. */
typedef enum kvfz_quant_rule {
  KVFZ_RULE_NVFP4_FLASHINFER = 0,          /* NVFP4 block scale sf = amax / (6 g), os = 1 / (e4m3(sf) g), e2m1(x os) */
  KVFZ_RULE_NVFP4_FLASHINFER_PRECISE = 1,  /* the same with sf = amax * RN(1 / (6 g)) */
  KVFZ_RULE_SCALE_LAYOUT_LINEAR = 2,       /* NVFP4 scales: K and V linear */
  KVFZ_RULE_SCALE_LAYOUT_SWIZZLED_V = 3,   /* K linear, V in vLLM's 4x4-swizzled layout (SM100 readers) */
  KVFZ_RULE_SCALE_LAYOUT_SWIZZLED = 4,     /* both swizzled */
  KVFZ_RULE_MX_OCP_FLOOR = 5,              /* MX: E = floor(log2 amax) - emax, codes of x / 2^E (saturating) */
  KVFZ_RULE_MX_NV_CEIL = 6,                /* MX: E = ceil(log2(amax / qmax)), codes of x * 2^-E */
  KVFZ_RULE_DS_MLA_FLT_MIN = 7,            /* ds_mla: s = max(amax / 448, FLT_MIN) */
  KVFZ_RULE_DS_MLA_POW2 = 8,               /* ds_mla: s = 2^ceil(log2(max(amax / 448, 1e-4))), exact */
  KVFZ_RULE_INDEXER_FP32 = 9,              /* indexer_k: s = max(amax, 1e-4) / 448 */
  KVFZ_RULE_INDEXER_UE8M0_LOG2F = 10,      /* then exp2f(ceilf(log2f(s))), log2f correctly rounded */
  KVFZ_RULE_INDEXER_UE8M0_EXACT = 11,      /* then the least power of two >= s */
  KVFZ_RULE_ASYM_F32 = 12,                 /* asymmetric formats: each step in fp32 */
  KVFZ_RULE_ASYM_F16 = 13,                 /*   in f16 */
  KVFZ_RULE_ASYM_BF16 = 14,                /*   in bf16 */
  KVFZ_RULE_ASYM_LANES_EXACT = 15,         /* min and max over the group's values */
  KVFZ_RULE_ASYM_LANES_ZERO_PADDED_POW2 = 16, /* zero lanes of a power-of-two load enter them (LMDeploy #4849) */
  KVFZ_RULE_INT4_SPLIT_HALF = 17,          /* uint4: dims d and d + D/2 share a byte */
  KVFZ_RULE_INT4_ADJACENT = 18             /* uint4: dims 2j and 2j + 1 share byte j */
} kvfz_quant_rule;

/* What a field of a quantised format stores, and in which buffer (appended in v2). */
typedef enum kvfz_field_role {
  KVFZ_ROLE_DATA = 0,   /* values of the input: codes, or (group 0) a copy (ds_mla's rope dims) */
  KVFZ_ROLE_SCALE = 1,  /* the scales of a data field's groups */
  KVFZ_ROLE_ZERO = 2    /* the zero points of an asymmetric format's groups */
} kvfz_field_role;
typedef enum kvfz_field_buffer {
  KVFZ_BUFFER_CACHE = 0,       /* kvfz_append_args.format_cache */
  KVFZ_BUFFER_SCALE_CACHE = 1  /* kvfz_append_args.format_scale_cache */
} kvfz_field_buffer;

#define KVFZ_MAX_SUBMODES 3
#define KVFZ_MAX_FIELDS 8

/* One axis of a field's layout, CuTe-style: `rank` sub-modes (extent, stride), the first fastest.
 * Coordinate c contributes c0*stride[0] + c1*stride[1] + c2*stride[2], where c0 = c % extent[0],
 * c1 = (c / extent[0]) % extent[1], c2 = c / (extent[0] * extent[1]) (for rank 3; a rank-1 mode is
 * c * stride[0]). Strides are in elements of the field's dtype. */
typedef struct kvfz_mode {
  int32_t rank;                        /* 1..KVFZ_MAX_SUBMODES */
  int64_t extent[KVFZ_MAX_SUBMODES];   /* unused sub-modes: extent 1 */
  int64_t stride[KVFZ_MAX_SUBMODES];
} kvfz_mode;

/* One typed field of a quantised format's call (appended in v2). Element (block, pos, head, dim)
 * of the field — dim is a group's index for scales and zero points — is element
 *   offset + mode_offset(mode[0], block) + mode_offset(mode[1], pos) + mode_offset(mode[2], head)
 *          + mode_offset(mode[3], dim)
 * of its buffer, in elements of its dtype: a 4-bit dtype counts nibbles (element e is byte e / 2,
 * the low nibble when e is even), an fp32 field in the byte cache counts 4-byte words. Block is the
 * call's (its shard's) physical block; mode[a]'s extents multiply to the axis's size. */
typedef struct kvfz_field {
  int32_t role;        /* kvfz_field_role */
  int32_t index;       /* 0: K (or MLA's latent entry and its rope), 1: V */
  int32_t dtype;       /* kvfz_dtype of its elements */
  int32_t buffer;      /* kvfz_field_buffer */
  int64_t offset;      /* element offset of (0, 0, 0, 0) in its buffer */
  kvfz_mode mode[4];   /* block, pos, head, dim (data) or group (scale, zero) */
  int32_t group;       /* data: dims per scale (0: copied, no scale); scale, zero: dims each covers */
  int32_t scale;       /* data: index in `fields` of its scale field (-1: none); scale, zero: of its data field */
  int32_t zero;        /* data of an asymmetric format: index of its zero-point field; else -1 */
  int32_t entry_dim;   /* data: the entry dim of its dim 0 (ds_mla's rope: the latent dims; else 0) */
} kvfz_field;

/* Where the pointers of an append call live. */
typedef enum kvfz_memory { KVFZ_MEMORY_HOST = 0, KVFZ_MEMORY_DEVICE = 1 } kvfz_memory;

/* How the kernel rounds quantised / narrowed values; kvfuzz maps it to a tolerance policy. */
typedef enum kvfz_rounding {
  KVFZ_ROUNDING_EXACT = 0,        /* the contract's rounding, bit for bit (--tolerance exact) */
  KVFZ_ROUNDING_WITHIN_1ULP = 1,  /* within one unit of the stored format (--tolerance ulp:1) */
  KVFZ_ROUNDING_UNSPECIFIED = 2   /* any value at the right place (--tolerance written-any-value) */
} kvfz_rounding;

/* Optional features (bits of kvfz_capabilities.features). A case needing a feature the plugin
 * does not declare is never sent to it. Slots >= capacity (unless NO_SLOTS_PAST_CAPACITY) and
 * padding slots other than -1 are part of the contract and sent; without KVFZ_FEATURE_INVALID_SLOT_COUNTER, invalid_slots is NULL
 * (the slots must still never be written) and the counter is not checked. */
#define KVFZ_FEATURE_FUSED_QKV 1u          /* key/value are views into one QKV buffer (stride_token > H*D) */
#define KVFZ_FEATURE_STRIDED_INPUT 2u      /* any input strides (gaps between rows and heads; key and
                                              value strides may differ, value head-major) */
#define KVFZ_FEATURE_PADDED_CACHE 4u       /* cache strides with gaps (stride_head > D, ...); with
                                              STRIDED_INPUT, also sent with 16-byte-aligned bases */
#define KVFZ_FEATURE_GRAPH_PADDING_ROWS 8u /* num_input_rows > num_slots (rows never read) */
#define KVFZ_FEATURE_INVALID_SLOT_COUNTER 16u /* counts slots >= capacity in *invalid_slots */
#define KVFZ_FEATURE_UNALIGNED 32u         /* base pointers not 16-byte aligned */
/* Appended in v2. The one negative bit: set, no slot >= capacity is ever sent (a kernel whose stack
 * never makes one, as no peer's does; the contract's "never written" then goes unchecked). */
#define KVFZ_FEATURE_NO_SLOTS_PAST_CAPACITY 64u

/* Strides and extent of one cache tensor, in elements of its dtype (fp32 elements, and no dim,
 * for scale caches). */
typedef struct kvfz_cache_geometry {
  int64_t num_blocks;
  int64_t block_size;
  int64_t stride_block;
  int64_t stride_pos;
  int64_t stride_head;
} kvfz_cache_geometry;

/* One append call. */
typedef struct kvfz_append_args {
  uint32_t struct_size;  /* sizeof(kvfz_append_args) as compiled into kvfuzz */
  int32_t memory;        /* kvfz_memory: host or device pointers */
  void* stream;          /* device plugins: the cudaStream_t / CUstream to launch on; NULL for host */

  const void* key;       /* [num_input_rows, num_heads, head_dim] view, last dim contiguous */
  const void* value;
  int64_t key_stride_token, key_stride_head;     /* elements */
  int64_t value_stride_token, value_stride_head; /* elements */
  int32_t input_dtype;   /* kvfz_dtype */

  const void* slot_mapping; /* [num_slots]; < 0 padding; >= capacity invalid */
  int32_t slot_type;        /* kvfz_index_type */
  int64_t num_slots;        /* T: rows to append; rows >= T of key/value are never read */
  int64_t num_input_rows;   /* T_in >= T */

  void* k_cache;            /* base of the K cache tensor */
  void* v_cache;            /* base of the V cache tensor (same geometry) */
  kvfz_cache_geometry cache;
  int32_t cache_dtype;      /* kvfz_dtype */
  int32_t layout;           /* kvfz_layout (informational) */
  int32_t num_heads;        /* H_kv */
  int32_t head_dim;         /* D */
  unsigned long long* invalid_slots; /* NULL, or a counter to add 1 to per slot >= capacity */

  int32_t scale_kind;       /* kvfz_scale_kind */
  const float* k_scale;     /* static scales: [1], [H] or [num_blocks, H] fp32; NULL otherwise */
  const float* v_scale;
  float* k_scale_cache;     /* per_token_head: base of the K / V scale caches; NULL otherwise */
  float* v_scale_cache;
  kvfz_cache_geometry scale_cache;

  /* Appended in v2 (zero for family KV): the format family and what it adds. */
  int32_t family;                  /* kvfz_family */
  int32_t value_head_dim;          /* KV_SPLIT: V's head dim (else 0: head_dim) */
  kvfz_cache_geometry value_cache; /* KV_SPLIT: V's geometry (num_blocks, block_size as cache's) */
  const void* rope;                /* MLA: k_pe, a [num_input_rows, 1, rope_dim] view; else NULL */
  int64_t rope_stride_token, rope_stride_head;
  int32_t rope_dim;                /* MLA: k_pe's dims, the entry's last */
  /* Appended in v2 (serving conventions; zero = the default contract). */
  int32_t padding;                 /* kvfz_padding of this case's slot_mapping */
  int32_t addressing;              /* kvfz_addressing; CSR: the six fields below, slot_mapping NULL */
  const int32_t* batch_indices;    /* CSR: [num_slots] request of each row */
  const int32_t* positions;        /* CSR: [num_slots] position of each row's token in its request */
  const int32_t* kv_indices;       /* CSR: [kv_indptr[batch_size]] the requests' pages, request by request */
  const int32_t* kv_indptr;        /* CSR: [batch_size + 1] */
  const int32_t* kv_last_page_len; /* CSR: [batch_size] */
  int32_t batch_size;              /* CSR: requests */
  int32_t window;                  /* kvfz_window */
  int64_t window_size, window_sinks;      /* a ring: W and S; 0 for NONE */
  const int32_t* window_positions; /* POSITIONS: [num_slots]; else NULL */
  const int32_t* window_seq_lens;  /* POSITIONS: [num_slots]; else NULL */
  int32_t cp_input;                /* kvfz_cp_input */
  int32_t cp_rank, cp_world_size, cp_interleave; /* this call's rank, N and I; 0, 1, 1 for NONE */
  const int32_t* cp_positions;     /* CP POSITIONS: [num_slots] global position of each row; else NULL */
  /* Appended in v2 (quantised formats; zero = NONE, the classic caches above). A format call's
   * cache_dtype is its codes' dtype, k_cache / v_cache and the scale caches are NULL, `cache` keeps
   * num_blocks and block_size (the capacity) and its strides in bytes (informational: the fields'
   * layouts are what counts), and NVFP4's global scales are k_scale[0] / v_scale[0] (PER_TENSOR). */
  int32_t quant_format;            /* kvfz_quant_format */
  uint32_t quant_rules;            /* bits 1u << kvfz_quant_rule of the conventions the format reads */
  int32_t quant_group;             /* dims per scale: 16 (NVFP4), 32 (MX), 128 (DS_MLA, INDEXER_K), head_dim (the rest) */
  void* format_cache;              /* byte 0 of the cache buffer (codes, and the scales of DS_MLA, INDEXER_K, *_INLINE) */
  void* format_scale_cache;        /* byte 0 of the scale-cache buffer (NVFP4, MX, ASYM_*); NULL when unused */
  int32_t num_fields;              /* entries of `fields` */
  kvfz_field fields[KVFZ_MAX_FIELDS]; /* the data fields, each followed by its scale (and zero) field */
} kvfz_append_args;

/* One rank's call of a slot-mapping producer (kvfuzz_plugin_cp_slot_mapping): for each row t,
 * slot_mapping[t] = the slot of row t's token on rank `rank` if that rank holds it, else -1. */
typedef struct kvfz_cp_slot_mapping_args {
  uint32_t struct_size;         /* sizeof(kvfz_cp_slot_mapping_args) as compiled into kvfuzz */
  int32_t memory;               /* kvfz_memory, as the plugin declared */
  void* stream;                 /* device plugins: the stream to launch on */
  const int32_t* positions;     /* [num_rows] global position of each row's token, -1 = padding */
  const int32_t* requests;      /* [num_rows] request of each row, -1 = padding */
  const int32_t* block_tables;  /* [num_requests, table_width] row-major, -1 past a table's end */
  int64_t num_rows, num_requests, table_width, block_size;
  int32_t rank, world_size, interleave;
  int32_t* slot_mapping;        /* [num_rows] output */
} kvfz_cp_slot_mapping_args;

/* What the kernel supports. kvfuzz zero-fills the struct and sets struct_size before the query. */
typedef struct kvfz_capabilities {
  uint32_t struct_size;   /* set by kvfuzz */
  int32_t memory;         /* kvfz_memory the plugin wants its pointers in */
  const char* name;       /* short name for reports, e.g. "my-append"; static storage */
  const char* description;/* one line; static storage; may be NULL */
  uint32_t layouts;       /* bits 1u << kvfz_layout */
  uint32_t input_dtypes;  /* bits 1u << kvfz_dtype */
  uint32_t cache_dtypes;  /* bits 1u << kvfz_dtype */
  uint32_t scale_kinds;   /* bits 1u << kvfz_scale_kind; bit 0 (NONE) for float caches */
  uint32_t slot_types;    /* bits 1u << kvfz_index_type */
  uint32_t features;      /* KVFZ_FEATURE_* bits */
  int32_t min_head_dim, max_head_dim; /* inclusive; 0 = no limit */
  int32_t head_dim_multiple;          /* head_dim % this == 0; 0 or 1 = any */
  int32_t max_num_heads;              /* 0 = no limit */
  int32_t max_block_size;             /* 0 = no limit */
  int32_t block_size_pow2_only;       /* nonzero: block sizes must be powers of two */
  int32_t same_input_cache_dtype;     /* nonzero: float caches only of the input's dtype (bit copy) */
  int32_t rounding;                   /* kvfz_rounding */
  /* Appended within v1 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, head_dims)): the only
   * head dims the kernel supports, e.g. {64, 128, 256, 512}; unused entries 0, all 0 = any head dim
   * (within min/max_head_dim and head_dim_multiple, which still apply). kvfuzz generates, shrinks to
   * and replays only these. */
  int32_t head_dims[KVFZ_MAX_HEAD_DIMS];
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, families)): bits 1u <<
   * kvfz_family of the families the kernel writes; 0 = KV only. */
  uint32_t families;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, padding_modes)): bits 1u <<
   * kvfz_padding of the padding conventions the kernel accepts; 0 = NEGATIVE only. */
  uint32_t padding_modes;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, addressings)): bits 1u <<
   * kvfz_addressing of the call conventions the kernel accepts; 0 = SLOT_MAPPING only. A kernel
   * that takes CSR alone declares 1u << KVFZ_ADDRESSING_CSR. */
  uint32_t addressings;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, windows)): bits 1u <<
   * kvfz_window of the ring conventions the kernel takes; 0 = NONE only (no ring cases). */
  uint32_t windows;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, cp_inputs)): bits 1u <<
   * kvfz_cp_input of the context-parallel conventions the kernel takes; 0 = NONE only (no shards). */
  uint32_t cp_inputs;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, quant_formats)): bits 1u <<
   * kvfz_quant_format of the quantised formats the kernel writes; 0 = NONE only (classic caches).
   * NONE is a bit like the others: formats without it (a ds_mla or indexer writer, which has no
   * classic mode) are sent cases of those formats only, and the campaign draws every case in one. */
  uint32_t quant_formats;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, quant_rules)): bits 1u <<
   * kvfz_quant_rule of the conventions it follows; 0 = kvfuzz's defaults, one of each group
   * (NVFP4_FLASHINFER, SCALE_LAYOUT_LINEAR, MX_OCP_FLOOR, DS_MLA_POW2, INDEXER_FP32, ASYM_F32,
   * ASYM_LANES_EXACT, INT4_SPLIT_HALF). A case whose format reads a convention not declared is not sent. */
  uint32_t quant_rules;
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, rope_dims)): the only rope
   * (k_pe) dims of an MLA entry the kernel supports, e.g. {64}; unused entries 0, all 0 = any. For
   * MLA, head_dims (and min/max_head_dim) are the entry's whole width, kv_c's dims plus the rope
   * dims (576 for DeepSeek's 512 + 64); for the other families, one head's dims. */
  int32_t rope_dims[KVFZ_MAX_ROPE_DIMS];
  /* Appended in v2 (write only if KVFZ_HAS_FIELD(caps, kvfz_capabilities, stride_granularity)): 0
   * (any) or a power of two of bytes, e.g. 16, that every stride of the input views (key, value,
   * rope) and of the K/V caches is a multiple of, as a vectorised kernel assumes and real allocators
   * give: kvfuzz then pads strides in whole units only, draws only head dims whose rows are whole
   * units, and never sends another stride. Scale caches are not held to it. */
  int32_t stride_granularity;
} kvfz_capabilities;

/* Exported by every plugin (visibility default, C linkage). The declarations carry
 * KVFUZZ_PLUGIN_EXPORT, so a plugin compiled with -fvisibility=hidden (recommended: its own copies
 * of common symbols then never bind to another library's) still exports exactly these three. */
#if defined(_WIN32)
#define KVFUZZ_PLUGIN_EXPORT __declspec(dllexport)
#else
#define KVFUZZ_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Must return KVFUZZ_PLUGIN_ABI_VERSION as the plugin was compiled. */
KVFUZZ_PLUGIN_EXPORT uint32_t kvfuzz_plugin_abi_version(void);

/* Fills *caps. Returns 0, or nonzero if the plugin cannot run here (it may write a reason of at
 * most error_size bytes, NUL-terminated, into error). device is the CUDA device index (--device).
 * kvfuzz calls it once in a short-lived probe process (to plan the campaign) and once in each
 * worker process before the first append; it must be cheap and must not depend on earlier calls. */
KVFUZZ_PLUGIN_EXPORT int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size);

/* Runs one append. Returns
 *   0                 the kernel was launched (device plugins may return before it finishes; kvfuzz
 *                     synchronises);
 *   KVFZ_APPEND_SKIP  the kernel does not support this case: skipped, not a finding (write the
 *                     reason into error: skips are counted by it);
 *   other nonzero     the call was refused or the launch failed (a `launch_error` finding; write the
 *                     reason into error).
 * Must not keep pointers past the call. Device plugins are called with `device` current
 * (cudaSetDevice) and should launch on args->stream; kvfuzz then calls cudaDeviceSynchronize(), so
 * work on other streams is waited for too.
 *
 * Device plugins must return their launch status: after their launches, check cudaGetLastError()
 * (or the driver API's result of cuLaunchKernel) and return nonzero with the error's text
 * (cudaGetErrorName, cudaGetErrorString) in error. A refused launch (too many threads per block, too
 * much shared memory, a grid too large) writes nothing and raises no error at synchronisation: a
 * plugin that returns 0 then shows only as `missing_write` findings, which point at the kernel's
 * stores instead of its launch configuration. examples/plugins/cuda/plugin.cpp does this. */
KVFUZZ_PLUGIN_EXPORT int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size);

/* Optional (looked up by name; a plugin without it gets kvfuzz's own slot mappings): the plugin's
 * context-parallel slot-mapping producer. Before each rank's call of a CP SLOT_MAPPING case kvfuzz
 * calls it with that rank, passes what it wrote to kvfuzz_plugin_append as slot_mapping, and
 * compares it with the formula after the call (a `slot_mapping_mismatch` finding names the row).
 * Returns 0, or nonzero with the reason in error (a `launch_error` finding). */
KVFUZZ_PLUGIN_EXPORT int kvfuzz_plugin_cp_slot_mapping(const kvfz_cp_slot_mapping_args* args, char* error, size_t error_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVFUZZ_PLUGIN_H */
