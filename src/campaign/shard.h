// shard.h — one slice of a campaign for N processes that share a seed (`--shard`, docs/scale.md).
//
// Case k of a campaign belongs to shard k mod N (0-based). Shard i checks cases i, i+N, i+2N, ...
// below the campaign's --cases, each the same case a single process would check (case k is a
// function of profile, seed and k only), so the N shards together check exactly the cases of one
// process, and a shard rerun with the same index does the same work (Kubernetes reruns a failed
// pod with its index, Slurm requeues a task with its id).
//
//   i/N      shard i of N, 0 <= i < N
//   slurm    a Slurm job array: (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP
//            of SLURM_ARRAY_TASK_COUNT
//   k8s/N    a Kubernetes Indexed Job: JOB_COMPLETION_INDEX of N (Kubernetes gives no count)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kvf {

struct Shard {
  int64_t index = 0;   // this process's shard, 0 <= index < count
  int64_t count = 1;   // shards of the campaign; 1: no sharding
  std::string from;    // how it was given: "i/N", "slurm" or "k8s" ("" without --shard)

  bool sharded() const { return count > 1 || !from.empty(); }
  bool owns(int64_t case_index) const { return case_index % count == index; }
  // The j-th case index of this shard: index + j * count.
  int64_t case_at(int64_t j) const { return index + j * count; }
  // Cases of this shard among cases 0..total-1.
  int64_t cases_of(int64_t total) const { return total > index ? (total - index + count - 1) / count : 0; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// Reads a --shard value. `env` looks up an environment variable (nullptr when unset). Throws
// InputError naming --shard, the variable and the expected form for a bad value or environment.
Shard parse_shard(const std::string& text, const std::function<const char*(const char*)>& env);

}  // namespace kvf
