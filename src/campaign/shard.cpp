// shard.cpp — see shard.h.
#include "shard.h"

#include <charconv>
#include <limits>
#include <optional>

#include "base/errors.h"

namespace kvf {

namespace {

constexpr int64_t kMaxShards = int64_t{1} << 40;

[[noreturn]] void refuse(const std::string& message) { throw InputError("--shard", "", message); }

// A whole number 0..max in `s`, or nullopt.
std::optional<int64_t> whole(const std::string& s, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

// The shard count after "k8s/" or in "i/N": 1..2^40.
int64_t count_of(const std::string& s, const std::string& given) {
  const std::optional<int64_t> n = whole(s, kMaxShards);
  if (!n || *n < 1)
    refuse("expected i/N, slurm or k8s/N with N a whole number from 1 to " + std::to_string(kMaxShards) + ", got " + given);
  return *n;
}

// An environment variable holding a whole number.
int64_t env_number(const std::function<const char*(const char*)>& env, const char* name, const std::string& mode, bool required,
                   int64_t fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') {
    if (!required) return fallback;
    refuse(mode + " needs the environment variable " + name + ", which is not set" +
           (mode == "slurm" ? " (run it as a task of a Slurm job array: sbatch --array=0-N-1)"
                            : " (run it in a pod of a Kubernetes Job with completionMode: Indexed)"));
  }
  const std::optional<int64_t> n = whole(v, std::numeric_limits<int64_t>::max());
  if (!n) refuse(mode + ": " + name + " must be a whole number, 0 or more; it is \"" + v + "\"");
  return *n;
}

}  // namespace

Shard parse_shard(const std::string& text, const std::function<const char*(const char*)>& env) {
  Shard s;
  if (text == "slurm") {
    s.from = "slurm";
    const int64_t id = env_number(env, "SLURM_ARRAY_TASK_ID", "slurm", true, 0);
    const int64_t count = env_number(env, "SLURM_ARRAY_TASK_COUNT", "slurm", true, 0);
    const int64_t min = env_number(env, "SLURM_ARRAY_TASK_MIN", "slurm", false, 0);
    const int64_t step = env_number(env, "SLURM_ARRAY_TASK_STEP", "slurm", false, 1);
    if (count < 1 || count > kMaxShards) refuse("slurm: SLURM_ARRAY_TASK_COUNT must be 1 to " + std::to_string(kMaxShards) + "; it is " + std::to_string(count));
    if (step < 1) refuse("slurm: SLURM_ARRAY_TASK_STEP must be 1 or more; it is " + std::to_string(step));
    if (id < min || (id - min) % step != 0 || (id - min) / step >= count)
      refuse("slurm: task " + std::to_string(id) + " is not one of the " + std::to_string(count) + " tasks " + std::to_string(min) +
             ", " + std::to_string(min) + "+" + std::to_string(step) + ", ... (SLURM_ARRAY_TASK_MIN/STEP/COUNT); "
             "shards need an array of evenly spaced ids, e.g. --array=0-" + std::to_string(count - 1));
    s.index = (id - min) / step;
    s.count = count;
    return s;
  }
  if (text.rfind("k8s/", 0) == 0) {
    s.from = "k8s";
    s.count = count_of(text.substr(4), text);
    s.index = env_number(env, "JOB_COMPLETION_INDEX", "k8s", true, 0);
    if (s.index >= s.count)
      refuse("k8s/" + std::to_string(s.count) + ": JOB_COMPLETION_INDEX is " + std::to_string(s.index) +
             ", not below " + std::to_string(s.count) + " (the Job's completions must equal N)");
    return s;
  }
  const size_t slash = text.find('/');
  if (slash == std::string::npos)
    refuse("expected i/N (0-based shard i of N), slurm or k8s/N, got \"" + text + "\"");
  s.from = "i/N";
  s.count = count_of(text.substr(slash + 1), text);
  const std::optional<int64_t> i = whole(text.substr(0, slash), kMaxShards);
  if (!i) refuse("expected i/N with i a whole number from 0 to N-1, got \"" + text + "\"");
  if (*i >= s.count) refuse("shard " + std::to_string(*i) + " of " + std::to_string(s.count) + " does not exist: shards are 0-based, 0 to " + std::to_string(s.count - 1) + ", got " + text);
  s.index = *i;
  return s;
}

}  // namespace kvf
