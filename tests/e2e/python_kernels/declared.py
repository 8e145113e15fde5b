"""Python kernels that declare capabilities, for test_python_targets.py (python-numpy convention).

  head_dims_64_128       declares, through its companion head_dims_64_128_capabilities(), paged NHD,
                         f16 and the head-dim set {64, 128}; appends a line to $KVFUZZ_TEST_VIOLATIONS
                         for every call outside that (kvfuzz must never make one), and raises for 2+
                         heads (a launch_error, so that campaigns shrink)
  triton_without_layouts declares slot dtypes only (no "layouts", no "families", no "cp_inputs"), so
                         kvfuzz must never send it vllm_legacy, a family other than kv or a
                         context-parallel case; runs kvfuzz_triton
                         (examples/python/kv_append_numpy.py) and appends to $KVFUZZ_TEST_VIOLATIONS for
                         a vllm_legacy call or a kv_split / k_only / mla one
  bad_layout, bad_head_dims, not_a_dict, raises_in_capabilities, declared_twice, bad_inputs, misspelt_key
                         declarations kvfuzz must refuse (exit 2) naming the key and the expected form
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from naive_copy import kv_append as copy  # noqa: E402


def violation(text):
    path = os.environ.get("KVFUZZ_TEST_VIOLATIONS")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def head_dims_64_128(key, value, key_cache, value_cache, slot_mapping, **kw):
    head_dim = key.shape[2]
    if kw["layout"] != "nhd" or kw["input_dtype"] != "f16" or kw["cache_dtype"] != "f16" or head_dim not in (64, 128):
        violation(f"layout {kw['layout']} {kw['input_dtype']} -> {kw['cache_dtype']} head_dim {head_dim}")
    if key.shape[1] >= 2:
        raise ValueError("two or more heads are not implemented")
    copy(key, value, key_cache, value_cache, slot_mapping, **kw)


def head_dims_64_128_capabilities():
    return {"layouts": ("paged_nhd",), "input_dtypes": {"f16"}, "cache_dtypes": ["f16"], "head_dims": [128, 64]}


def triton_without_layouts(key, value, key_cache, value_cache, slot_mapping, **kw):
    if kw["layout"] == "vllm_legacy":
        violation("vllm_legacy sent to a function that declares no layouts")
    if value is None or "rope" in kw or value.shape[2] != key.shape[2]:
        violation("a family other than kv sent to a function that declares no families")
    from kv_append_numpy import kv_append as triton_numpy  # imports triton: only when called
    triton_numpy(key, value, key_cache, value_cache, slot_mapping, **kw)


triton_without_layouts.kvfuzz_capabilities = {"slot_dtypes": ["i32", "i64"]}


def bad_layout(*args, **kw):
    copy(*args, **kw)


bad_layout.kvfuzz_capabilities = {"layouts": ["nhd"]}


def bad_head_dims(*args, **kw):
    copy(*args, **kw)


bad_head_dims.kvfuzz_capabilities = {"head_dims": [64, "128"]}


def not_a_dict(*args, **kw):
    copy(*args, **kw)


def not_a_dict_capabilities():
    return ["paged_nhd"]


def raises_in_capabilities(*args, **kw):
    copy(*args, **kw)


def raises_in_capabilities_capabilities():
    raise RuntimeError("no capabilities today")


def declared_twice(*args, **kw):
    copy(*args, **kw)


declared_twice.kvfuzz_capabilities = {}


def declared_twice_capabilities():
    return {}


def bad_inputs(*args, **kw):
    raise AssertionError("never called: the declaration is refused")


bad_inputs.kvfuzz_capabilities = {"inputs": ["request"]}


def misspelt_key(*args, **kw):
    raise AssertionError("never called: the declaration is refused")


misspelt_key.kvfuzz_capabilities = {"input": ["requests"]}
