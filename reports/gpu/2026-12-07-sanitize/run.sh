#!/usr/bin/env bash
# On the GPU machine, from the repository root, with build-gpu/ carried (kvfuzz stripped, wild-write.so):
# a crash finding on a GPU plugin prints a compute-sanitizer locate: line; replay --sanitize runs it.
set -u
K=build-gpu/kvfuzz; W=plugin:build-gpu/wild-write.so
o=${OUT:-/tmp/out}; mkdir -p "$o"; cd "$o"; R=$OLDPWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
which compute-sanitizer; compute-sanitizer --version | tail -1
echo "== run on the wild-write device plugin"
$R/$K run --target plugin:$R/build-gpu/wild-write.so --cases 40 --seed 1 --corpus-out f --json run.json > run.txt 2> run.err; echo "rc=$?"
cat run.txt; tail -3 run.err
echo "== replay f --sanitize"
$R/$K replay f --sanitize > san.txt 2> san.err; echo "rc=$?"
head -40 san.err; echo ...; tail -8 san.err; cat san.txt
echo "== clean cuda target under --sanitize (a passing case)"
$R/$K generate --seed 2 --cases 3 -o g > /dev/null; $R/$K replay g --target cuda --sanitize > clean.txt 2> clean.err; echo "rc=$?"
tail -4 clean.err; cat clean.txt
