#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build of kvfuzz-libfuzzer (docs/scale.md): runs in $SRC/kvfuzz with CC,
# CXX, CFLAGS, CXXFLAGS, LIB_FUZZING_ENGINE, SRC, OUT and WORK set by the base-builder image, and
# leaves $OUT/kvfuzz-libfuzzer with its .dict, .options and _seed_corpus.zip.
cd "$SRC/kvfuzz"
scripts/build-libfuzzer.sh "$OUT"
