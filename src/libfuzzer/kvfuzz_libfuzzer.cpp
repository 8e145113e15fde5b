// kvfuzz_libfuzzer.cpp — kvfuzz-libfuzzer: the CUDA kernel's emulated body under libFuzzer (and
// OSS-Fuzz / ClusterFuzzLite), docs/scale.md.
//
// LLVMFuzzerTestOneInput decodes the bytes into a genotype (genotype_bytes.h), materialises the
// case, runs kernels/cuda on cuda-emu in this process against the golden model over the whole
// guarded arena, and when the kernel is wrong prints the finding's signature and aborts: a
// libFuzzer crash. Only the kernel is built with coverage instrumentation (scripts/build-libfuzzer.sh),
// so libFuzzer's coverage is that of the kernel's own branches.
//
//   scripts/build-libfuzzer.sh OUT_DIR                     build (clang, no CUDA toolkit needed)
//   OUT_DIR/kvfuzz-libfuzzer -seed=1 -runs=20000 CORPUS/   fuzz
//   KVFUZZ_CASE_OUT=DIR OUT_DIR/kvfuzz-libfuzzer crash-…   write the input's case as DIR/<hash>.json
//   kvfuzz replay DIR/<hash>.json                          run that case with the full harness
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "arena/arena.h"
#include "report/verdict.h"
#include "campaign/signature.h"
#include "case/case_json.h"
#include "case/validate.h"
#include "gen/materialize.h"
#include "golden/golden.h"
#include "kv_append.h"
#include "genotype_bytes.h"
#include "targets/target.h"

namespace kvf {

// cuda_emu.cpp's target class declares Target::run_windowed, whose host implementation needs
// Thrust; cases here are small and never windowed, so this build has none.
RunResult Target::run_windowed(const Case&, std::byte*, const ArenaLayout&, const WindowPlan&, OutsideDiff&) {
  return {RunStatus::launch_error, "kvfuzz-libfuzzer has no windowed mode"};
}

namespace {

Verdict launch_refused(const std::string& why) {
  Finding f;
  f.kind = FindingKind::launch_error;
  f.victim = "the run";
  f.writer = "the kernel";
  f.sentence = "launch refused: " + why;
  f.victim_class = "run";
  f.writer_class = "kernel";
  Verdict v;
  v.findings.push_back(f);
  return v;
}

// The whole check of one case, in process: golden expectation, the emulated kernel, arena diff.
Verdict check(const Case& c) {
  const ArenaLayout layout = plan_arena(c);
  const Arena initial = make_initial_arena(c);
  Arena expected = initial;
  golden::golden_append(c, expected);
  Arena actual = initial;
  switch (kv_append_emu(append_params(c, actual.data(), layout))) {
    case LaunchStatus::ok: break;
    case LaunchStatus::unsupported_dtype:
      return launch_refused("kernel has no specialisation for " + std::string(to_string(c.input_dtype)) + " -> " +
                            std::string(to_string(c.cache_dtype)));
    case LaunchStatus::launch_error: return launch_refused("launch failed");
  }
  return compare_arenas(c, initial, expected, actual);
}

}  // namespace
}  // namespace kvf

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvf;
  static uint64_t inputs = 0;  // inputs run by this process, this one included
  ++inputs;
  Case c = materialize(genotype_from_bytes(data, size));
  if (!validate(c).empty()) return -1;  // cannot happen for a materialised genotype; never kept in the corpus
  const Verdict v = check(c);
  const char* out = std::getenv("KVFUZZ_CASE_OUT");
  if (out != nullptr && *out != '\0') {  // crash artifact -> case JSON for `kvfuzz replay`
    c.expect = v.pass() ? Expectation{} : Expectation{Expect::fail, std::string(to_string(v.findings.front().kind))};
    c.provenance = Provenance{"", -1, KVFUZZ_VERSION, "kvfuzz-libfuzzer (KVFUZZ_CASE_OUT)", "cuda-emu"};
    std::fprintf(stderr, "kvfuzz-libfuzzer: case written to %s\n", save_case(c, out).c_str());
  }
  if (v.pass()) return 0;
  const Signature s = signature_of(c, v);
  std::fprintf(stderr, "kvfuzz-libfuzzer: FINDING signature %s: %s\n  %s\n  after %llu inputs\n", s.id().c_str(),
               s.text().c_str(), v.findings.front().sentence.c_str(), static_cast<unsigned long long>(inputs));
  std::fprintf(stderr, "kvfuzz-libfuzzer: KVFUZZ_CASE_OUT=DIR %s <crash file> writes its case; kvfuzz replay DIR runs it\n",
               "kvfuzz-libfuzzer");
  std::abort();
}
