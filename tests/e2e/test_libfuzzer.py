"""kvfuzz-libfuzzer and ClusterFuzzLite (issue 19; run by ctest as fuzz.libfuzzer, docs/scale.md):
.clusterfuzzlite/build.sh run with the OSS-Fuzz environment emulated (CC, CXX, CFLAGS, CXXFLAGS,
LIB_FUZZING_ENGINE, SRC, OUT, WORK) and no CUDA toolkit on any include path; a bounded fuzzing run
(-seed, -runs) of the clean kernel finds nothing; the same build of a planted mutant (padding rows
not skipped) is killed, its crash artifact converts to a case JSON that `kvfuzz replay` fails on
the mutant and passes on the clean kernel; a mutant of an inline helper the golden model shares
(kv_layout.cuh) is killed too. Exit 77 (skipped) without clang and libFuzzer.

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_MUTANT_BIN=build/tests/mutants/kvfuzz-mutant-padding-not-skipped \\
    KVFUZZ_SOURCE_DIR=. python3 test_libfuzzer.py        # from tests/e2e
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT = os.environ.get("KVFUZZ_MUTANT_BIN", "kvfuzz-mutant-padding-not-skipped")
SOURCE = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", "../..")).resolve()
CLANG = os.environ.get("KVFUZZ_FUZZ_CXX", "clang++")
# What OSS-Fuzz's base-builder sets for an address-sanitizer libFuzzer build.
OSS_FUZZ_FLAGS = ("-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION "
                  "-fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link")


def libfuzzer_available():
    if shutil.which(CLANG) is None:
        return False
    probe = subprocess.run([CLANG, "-x", "c++", "-fsanitize=fuzzer", "-", "-o", os.devnull], capture_output=True,
                           input=b'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }')
    return probe.returncode == 0


class ClusterFuzzLite(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = pathlib.Path(cls.tmp.name)
        cls.t = t
        (t / "src").mkdir()
        (t / "src" / "kvfuzz").symlink_to(SOURCE)  # the image's $SRC/kvfuzz
        # A compiler wrapper that logs every command, to show that no CUDA include path is used.
        cls.log = t / "compiler.log"
        wrapper = t / "clang++-logged"
        wrapper.write_text(f'#!/bin/sh\necho "$@" >>{cls.log}\nexec {shutil.which(CLANG)} "$@"\n')
        wrapper.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH")}
        env.update(CC=CLANG.replace("++", ""), CXX=str(wrapper), CFLAGS=OSS_FUZZ_FLAGS, CXXFLAGS=OSS_FUZZ_FLAGS,
                   LIB_FUZZING_ENGINE="-fsanitize=fuzzer", SANITIZER="address", FUZZING_ENGINE="libfuzzer",
                   ARCHITECTURE="x86_64", SRC=str(t / "src"), OUT=str(t / "out"), WORK=str(t / "work"))
        cls.env = env
        (t / "out").mkdir()
        (t / "work").mkdir()
        cls.build = subprocess.run(["bash", SOURCE / ".clusterfuzzlite/build.sh"], cwd=t / "src", env=env,
                                   capture_output=True, text=True, timeout=900)
        cls.build_commands = cls.log.read_text() if cls.log.exists() else ""  # before the mutant builds add theirs

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def fuzz(self, binary, corpus, *args):
        corpus.mkdir(exist_ok=True)
        return subprocess.run([binary, "-seed=1", "-max_len=256", *args, str(corpus)], capture_output=True, text=True,
                              timeout=600, env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))

    def test_build_sh_builds_the_target_with_its_dictionary_options_and_seed_corpus(self):
        self.assertEqual(self.build.returncode, 0, self.build.stdout + self.build.stderr)
        out = self.t / "out"
        for name in ("kvfuzz-libfuzzer", "kvfuzz-libfuzzer.dict", "kvfuzz-libfuzzer.options"):
            self.assertTrue((out / name).is_file(), name)
        self.assertIn("dict = kvfuzz-libfuzzer.dict", (out / "kvfuzz-libfuzzer.options").read_text())
        with zipfile.ZipFile(out / "kvfuzz-libfuzzer_seed_corpus.zip") as z:
            self.assertGreaterEqual(len(z.namelist()), 4)
        commands = self.build_commands
        self.assertNotIn("cuda/include", commands)           # no toolkit: the host stand-ins instead
        self.assertIn("src/libfuzzer/cuda_host", commands)
        # Coverage only on the kernel: the one compile with -fsanitize=fuzzer-no-link is kv_append_emu.cpp.
        instrumented = [l for l in commands.splitlines() if "fuzzer-no-link" in l and " -c " in l]
        self.assertEqual(len(instrumented), 1, instrumented)
        self.assertIn("kv_append_emu.cpp", instrumented[0])

    def test_a_bounded_run_of_the_clean_kernel_finds_nothing(self):
        p = self.fuzz(self.t / "out/kvfuzz-libfuzzer", self.t / "corpus-clean", "-runs=4000",
                      f"-dict={self.t / 'out/kvfuzz-libfuzzer.dict'}")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("Done 4000 runs", p.stderr)

    def build_mutant(self, name):
        mutant_src = self.t / f"kernel-{name}"
        subprocess.run([sys.executable, SOURCE / "tests/mutants/apply_mutant.py", SOURCE / "tests/mutants/mutants.json",
                        SOURCE / "kernels/cuda", name, mutant_src], check=True)
        build = subprocess.run([SOURCE / "scripts/build-libfuzzer.sh", self.t / f"out-{name}"],
                               env=dict(self.env, KVFUZZ_KERNEL_DIR=str(mutant_src)), capture_output=True, text=True, timeout=900)
        self.assertEqual(build.returncode, 0, build.stderr)
        return self.t / f"out-{name}/kvfuzz-libfuzzer"

    def test_a_mutant_of_an_inline_helper_shared_with_the_golden_model_is_killed(self):
        # block-stride-ignored rewrites kv_layout.cuh's cache_elem_offset, which the golden model and
        # the arena use too: the kernel's copy must stay the kernel's (build-libfuzzer.sh renames its
        # namespace), or the linker keeps one definition for both and the mutant is invisible.
        binary = self.build_mutant("block-stride-ignored")
        p = self.fuzz(binary, self.t / "corpus-stride", "-runs=3000", str(SOURCE / "src/libfuzzer/seeds"),
                      f"-artifact_prefix={self.t}/stride-")
        self.assertNotEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertRegex(p.stderr, r"kvfuzz-libfuzzer: FINDING signature [0-9a-f]{16}: v2 ")

    def test_the_planted_mutant_is_killed_and_its_crash_replays_as_a_case(self):
        binary = self.build_mutant("padding-not-skipped")
        artifacts = self.t / "artifacts"
        artifacts.mkdir()
        p = self.fuzz(binary, self.t / "corpus-mutant", "-runs=20000", f"-artifact_prefix={artifacts}/")
        self.assertNotEqual(p.returncode, 0)
        m = re.search(r"kvfuzz-libfuzzer: FINDING signature ([0-9a-f]{16}): (v2 \S+)", p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        crashes = list(artifacts.glob("crash-*"))
        self.assertEqual(len(crashes), 1)
        cases = self.t / "cases"
        conv = subprocess.run([binary, crashes[0]], capture_output=True, text=True,
                              env=dict(os.environ, KVFUZZ_CASE_OUT=str(cases), ASAN_OPTIONS="detect_leaks=0"))
        self.assertNotEqual(conv.returncode, 0)  # it still crashes; the case is written first
        self.assertIn(f"FINDING signature {m.group(1)}", conv.stderr)
        case = next(cases.glob("*.json"))
        bug = subprocess.run([MUTANT, "replay", case], capture_output=True, text=True)
        self.assertEqual(bug.returncode, 1, bug.stdout + bug.stderr)
        fixed = subprocess.run([BIN, "replay", case], capture_output=True, text=True)
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        self.assertIn("passes now", fixed.stdout)
        # The case carries its genotype: `kvfuzz shrink` works on it like on a case `run` saved.
        shrunk = subprocess.run([MUTANT, "shrink", case, "-o", self.t / "shrunk"], capture_output=True, text=True)
        self.assertEqual(shrunk.returncode, 1, shrunk.stdout + shrunk.stderr)


if __name__ == "__main__":
    if not libfuzzer_available():
        print(f"test_libfuzzer: {CLANG} cannot link libFuzzer (scripts/setup.sh installs clang and libclang-rt-14-dev); skipped")
        sys.exit(77)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
