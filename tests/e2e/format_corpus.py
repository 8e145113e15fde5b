"""Hand-built case files of every quantised format and convention (case JSON v2), for replays.

    python3 tests/e2e/format_corpus.py OUT_DIR [--dist finite|special]

Until the generator draws quantised formats, these are the end-to-end check of a format target:
`kvfuzz replay OUT_DIR --target triton-interp` must pass every file (tests/e2e/CMakeLists.txt,
e2e.triton_interp_format_replay). Each case is two requests in a paged NHD cache of 3 blocks of 4
slots (request 0: context 1, two new tokens; request 1: one new token), a padding row between them
and an invalid slot at the end, 2 heads (1 for ds_mla and indexer_k), the fields laid out as
src/case/quant_fields.cpp describes them (caches in bytes, scale caches in scale elements).
"""
import argparse
import itertools
import json
import os

NB, BS = 3, 4
SLOTS = [5, -1, 6, 8, 3 * 4 + 7]  # block 1 offsets 1, 2 (request 0), block 2 offset 0 (request 1); invalid
REQUESTS = [{"context_len": 1, "new_len": 2, "blocks": [1]}, {"context_len": 0, "new_len": 1, "blocks": [2]}]
CODE_DTYPE = {"nvfp4": "fp4_e2m1", "mxfp4": "fp4_e2m1", "mxfp8_e4m3": "fp8_e4m3", "mxfp8_e5m2": "fp8_e5m2",
              "ds_mla": "fp8_e4m3", "indexer_k": "fp8_e4m3", "fp8_inline": "fp8_e4m3", "int8_inline": "int8",
              "asym_int8": "uint8", "asym_int4": "uint4"}
GROUP = {"nvfp4": 16, "mxfp8_e4m3": 32, "mxfp8_e5m2": 32, "mxfp4": 32}


def case(fmt, rules, D, H=2, pad=4, input_dtype="bf16", dist="finite", seed=1):
    T = len(SLOTS)
    family = "kv"
    j = {"schema": "kvfuzz-case", "version": 2}
    row_in = 2 * H * D + 8  # key and value rows side by side, 8 elements of padding
    key = {"offset": 0, "stride_token": row_in, "stride_head": D}
    value = {"offset": H * D, "stride_token": row_in, "stride_head": D}
    scale_kind = "none"
    scale_cache = {"stride_block": 0, "stride_pos": 0, "stride_head": 0}
    scale_v = scale_elems = 0
    if fmt == "ds_mla":
        family, H, latent, rope_dim = "mla", 1, D - 64, 64
        row = latent + 4 * (latent // 128) + 2 * rope_dim
        row_in = latent + rope_dim + 8
        key = {"offset": 0, "stride_token": row_in, "stride_head": 0}
        value = {"offset": 0, "stride_token": 0, "stride_head": 0}
        j["format"] = {"family": "mla", "rope_dim": rope_dim,
                       "rope": {"offset": latent, "stride_token": row_in, "stride_head": 0}}
        cache = {"stride_block": BS * row, "stride_pos": row, "stride_head": row, "k_offset": 0, "v_offset": 0,
                 "buffer_elems": NB * BS * row}
    elif fmt == "indexer_k":
        family, H = "k_only", 1
        row_in = D + 8
        key = {"offset": 0, "stride_token": row_in, "stride_head": D}
        value = {"offset": 0, "stride_token": 0, "stride_head": 0}
        j["format"] = {"family": "k_only"}
        block = BS * D + BS * (D // 128) * 4 + 16
        cache = {"stride_block": block, "stride_pos": D, "stride_head": D, "k_offset": 0, "v_offset": 0,
                 "buffer_elems": NB * block}
    else:
        row = D + pad if fmt.endswith("_inline") else (D // 2 if fmt in ("nvfp4", "mxfp4", "asym_int4") else D)
        tensor = NB * BS * H * row
        cache = {"stride_block": BS * H * row, "stride_pos": H * row, "stride_head": row, "k_offset": 0,
                 "v_offset": tensor + 16, "buffer_elems": 2 * tensor + 16}
        if fmt not in ("fp8_inline", "int8_inline"):
            S = 2 if fmt.startswith("asym") else D // GROUP[fmt]
            scale_cache = {"stride_block": BS * H * S, "stride_pos": H * S, "stride_head": S}
            scale_v = NB * BS * H * S + 4
            scale_elems = 2 * scale_v
    if fmt == "nvfp4":
        scale_kind = "per_tensor"
    j["shape"] = {"num_heads": H, "head_dim": D, "num_q_heads": 0, "input_dtype": input_dtype,
                  "cache_dtype": CODE_DTYPE[fmt], "slot_dtype": "i64"}
    j["cache"] = {"layout": "paged_nhd", "num_blocks": NB, "block_size": BS, **cache}
    j["quant"] = {"scale_kind": scale_kind, "scale_dist": "random" if scale_kind != "none" else "unit",
                  "scale_cache": scale_cache, "scale_k_offset": 0, "scale_v_offset": scale_v,
                  "scale_cache_elems": scale_elems, "format": fmt}
    if rules:
        j["quant"]["rules"] = rules
    j["input"] = {"num_rows": T, "buffer_elems": T * row_in, "key": key, "value": value}
    j["slot_mapping"] = SLOTS
    j["requests"] = REQUESTS
    j["payload"] = {"dist": dist, "seed": str(seed)}
    j["expect"] = {"outcome": "pass"}
    j["provenance"] = {"seed": "", "case_index": -1, "tool_version": "", "command_line": "tests/e2e/format_corpus.py",
                       "target": ""}
    return j


def cases(dist):
    out = []
    for rule, layout in itertools.product(("flashinfer", "flashinfer_precise"), ("linear", "swizzled_v", "swizzled")):
        out.append(("nvfp4", {"nvfp4": rule, "scale_layout": layout}, 64))
    for fmt, rule in itertools.product(("mxfp8_e4m3", "mxfp8_e5m2", "mxfp4"), ("ocp_floor", "nv_ceil")):
        out.append((fmt, {"mx": rule}, 64))
    for rule in ("flt_min", "pow2"):
        out.append(("ds_mla", {"ds_mla": rule}, 576))
    for rule in ("fp32", "ue8m0_log2f", "ue8m0_exact"):
        out.append(("indexer_k", {"indexer": rule}, 128))
    out += [("fp8_inline", None, 48), ("int8_inline", None, 48)]
    for arith, lanes in itertools.product(("f32", "f16", "bf16"), ("exact", "zero_padded_pow2")):
        out.append(("asym_int8", {"asym_arith": arith, "asym_lanes": lanes}, 48))
    for pairing, lanes in itertools.product(("split_half", "adjacent"), ("exact", "zero_padded_pow2")):
        out.append(("asym_int4", {"asym_arith": "f32", "asym_lanes": lanes, "int4_pairing": pairing}, 80))
    return [case(fmt, rules, D, dist=dist, seed=i + 1, input_dtype=("bf16", "f16", "f32")[i % 3])
            for i, (fmt, rules, D) in enumerate(out)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--dist", default="finite")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for i, c in enumerate(cases(a.dist)):
        rules = "-".join(c["quant"].get("rules", {}).values())
        name = f"{i:02d}-{c['quant']['format']}{'-' + rules if rules else ''}.json"
        with open(os.path.join(a.out_dir, name), "w") as f:
            json.dump(c, f, indent=1)
    print(f"format_corpus: {len(cases(a.dist))} cases -> {a.out_dir}")


if __name__ == "__main__":
    main()
