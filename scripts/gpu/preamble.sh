# preamble.sh — sourced by the scripts/gpu/*.sh of one H200 call: the carried kvfuzz ($B) and plugins
# ($P) and $OUT/device.txt (date, GPU, driver, memory, kvfuzz version, host cores). Needs OUT set.
set -u
B=$PWD/build-h200/bin/kvfuzz
P=$PWD/build-h200/plugins
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $B --version; nproc; } > $OUT/device.txt 2>&1
