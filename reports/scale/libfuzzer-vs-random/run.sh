#!/usr/bin/env bash
# The committed experiment of issue 19 (README.md beside this script): how many cases the random
# generator (`kvfuzz run`, the self-test's campaign of each mutant) and libFuzzer (kvfuzz-libfuzzer,
# one build per mutant) need to kill each CPU mutant of tests/mutants/mutants.json, each given the
# same budget: one process, SECONDS of wall time on an otherwise idle core, seed 1.
#   reports/scale/libfuzzer-vs-random/run.sh BUILD_DIR [SECONDS]    -> results.tsv beside it
set -euo pipefail
src="$(cd "$(dirname "$0")/../../.." && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)"
seconds="${2:-20}"
here="$src/reports/scale/libfuzzer-vs-random"
work="${WORK_DIR:-/tmp/kvfuzz-lf-vs-random}"
mkdir -p "$work"
cuda_include="$(sed -n 's/^CUDAToolkit_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")"
mutants=$(python3 -c "
import json
for m in json.load(open('$src/tests/mutants/mutants.json'))['mutants']:
    if m.get('kernel', 'cuda') == 'cuda' and not m.get('gpu_only'):
        print(m['name'], m.get('config', '-'), m['max_cases'])")
out="$here/results.tsv"
printf 'mutant\tprofile\trandom_cases_to_kill\trandom_seconds\trandom_cases_per_s\tlibfuzzer_inputs_to_kill\tlibfuzzer_seconds\tlibfuzzer_inputs_per_s\n' >"$out"
while read -r name config max; do
  dir="$work/$name"
  rm -rf "$dir" && mkdir -p "$dir"
  python3 "$src/tests/mutants/apply_mutant.py" "$src/tests/mutants/mutants.json" "$src/kernels/cuda" "$name" "$dir/kernel" >/dev/null
  # random: the mutant as a host plugin (as the self-test builds it), one `kvfuzz run` within the budget
  c++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -isystem "$cuda_include" -I "$src/include" -I "$dir/kernel" \
    "$src/examples/plugins/cuda/plugin.cpp" "$dir/kernel/kv_append_emu.cpp" -o "$dir/mutant.so"
  cfg=(); [ "$config" != - ] && cfg=(--config "$src/$config")
  "$build/kvfuzz" run --target "plugin:$dir/mutant.so" --seed 1 --cases 0 --seconds "$seconds" "${cfg[@]}" \
    --confirm-runs 0 --max-shrink-tries 0 --corpus-out "$dir/found" --json "$dir/random.json" >"$dir/random.log" 2>&1 || true
  r=$(python3 -c "
import json; s = json.load(open('$dir/random.json'))
f = s['failing_cases']
print((f[0]['case_index'] + 1) if f else 'survived', round(f and s['failures'][0]['seconds_to_find'] or s['seconds'], 2), round(s['cases_per_second']))")
  # libFuzzer: the kernel rebuilt into kvfuzz-libfuzzer (the harness objects are shared)
  KVFUZZ_KERNEL_DIR="$dir/kernel" WORK="$work/obj" "$src/scripts/build-libfuzzer.sh" "$dir/lf" >/dev/null
  mkdir -p "$dir/lf-corpus"
  start=$(date +%s.%N)
  "$dir/lf/kvfuzz-libfuzzer" -seed=1 -max_len=256 -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/lf-corpus" >"$dir/lf.log" 2>&1 || true
  end=$(date +%s.%N)
  l=$(python3 -c "
import re; t = open('$dir/lf.log').read()
m = re.search(r'after (\d+) inputs', t)
runs = re.findall(r'^#(\d+)', t, re.M)
n = int(m.group(1)) if m else int(runs[-1]) if runs else 0
secs = $end - $start
print(m.group(1) if m else 'survived', round(secs, 2), round(n / secs) if secs else 0)")
  printf '%s\t%s\t%s\t%s\n' "$name" "$config" "$(tr ' ' '\t' <<<"$r")" "$(tr ' ' '\t' <<<"$l")" | tee -a "$out"
done <<<"$mutants"

# libFuzzer again with the seed corpus ClusterFuzzLite ships (src/libfuzzer/seeds/, as in
# kvfuzz-libfuzzer_seed_corpus.zip) and its dictionary: lf-seeded.log.
while read -r name config max; do
  dir="$work/$name"
  rm -rf "$dir/lf-seeded-corpus" && mkdir -p "$dir/lf-seeded-corpus"
  "$dir/lf/kvfuzz-libfuzzer" -seed=1 -max_len=256 -max_total_time="$seconds" -print_final_stats=1 \
    -dict="$dir/lf/kvfuzz-libfuzzer.dict" -artifact_prefix="$dir/seeded-" "$dir/lf-seeded-corpus" "$src/src/libfuzzer/seeds" \
    >"$dir/lf-seeded.log" 2>&1 || true
done <<<"$mutants"
python3 "$here/summarise.py"
