// metamorphic.cpp — see metamorphic.h.
#include "metamorphic.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "kvfuzz_plugin.h"

namespace kvf {

namespace {

using AppendFn = int (*)(const kvfz_append_args*, char*, size_t);

// One random batch: geometry, inputs and the caches' initial bytes. f16 elements (uint16_t bits).
struct Batch {
  int64_t heads = 1, head_dim = 1, block_size = 1, num_blocks = 1;
  bool hnd = false;                  // paged HND [nb, H, bs, D] instead of NHD [nb, bs, H, D]
  std::vector<uint16_t> key, value;  // [T, H, D] contiguous
  std::vector<int64_t> slots;        // [T] distinct in-range slots, or -1 (padding)
  std::vector<uint16_t> k_cache, v_cache;  // [1 + nb + 1 blocks]: initial bytes, a guard block either side

  int64_t tokens() const { return static_cast<int64_t>(slots.size()); }
  int64_t row() const { return heads * head_dim; }
  int64_t block_elems() const { return block_size * heads * head_dim; }
  kvfz_cache_geometry geometry() const {
    kvfz_cache_geometry g{};
    g.num_blocks = num_blocks;
    g.block_size = block_size;
    g.stride_block = block_elems();
    g.stride_pos = hnd ? head_dim : heads * head_dim;
    g.stride_head = hnd ? block_size * head_dim : head_dim;
    return g;
  }
};

Batch random_batch(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Batch b;
  b.heads = pick(1, 4);
  b.head_dim = pick(1, 3) == 1 ? pick(1, 20) : 8 * pick(1, 16);
  b.block_size = pick(1, 3) == 1 ? pick(1, 5) : pick(1, 32);
  b.num_blocks = pick(2, 8);
  b.hnd = pick(0, 1) == 1;
  const int64_t capacity = b.num_blocks * b.block_size;
  const int64_t t = pick(2, std::min<int64_t>(capacity + 1, 24));
  std::vector<int64_t> all(static_cast<size_t>(capacity));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (int64_t i = 0; i < t; ++i) b.slots.push_back(i < capacity && pick(0, 5) ? all[static_cast<size_t>(i)] : -1);
  auto fill = [&](std::vector<uint16_t>& v, size_t n) {
    v.resize(n);
    for (uint16_t& x : v) x = static_cast<uint16_t>(pick(0, 0xffff) & 0xfbff);  // finite f16 values (exponent never all ones)
  };
  fill(b.key, static_cast<size_t>(t * b.row()));
  fill(b.value, static_cast<size_t>(t * b.row()));
  fill(b.k_cache, static_cast<size_t>((capacity + 2 * b.block_size) * b.row()));
  fill(b.v_cache, static_cast<size_t>((capacity + 2 * b.block_size) * b.row()));
  return b;
}

// Appends tokens [begin, end) of `b` into the given caches. Returns false when the plugin refused.
bool append(AppendFn fn, const Batch& b, int64_t begin, int64_t end, std::vector<uint16_t>& k_cache,
            std::vector<uint16_t>& v_cache) {
  kvfz_append_args a{};
  a.struct_size = sizeof a;
  a.memory = KVFZ_MEMORY_HOST;
  a.key = b.key.data() + begin * b.row();
  a.value = b.value.data() + begin * b.row();
  a.key_stride_token = a.value_stride_token = b.row();
  a.key_stride_head = a.value_stride_head = b.head_dim;
  a.input_dtype = KVFZ_F16;
  a.slot_mapping = b.slots.data() + begin;
  a.slot_type = KVFZ_I64;
  a.num_slots = a.num_input_rows = end - begin;
  a.k_cache = k_cache.data() + b.block_elems();  // past the guard block
  a.v_cache = v_cache.data() + b.block_elems();
  a.cache = b.geometry();
  a.cache_dtype = KVFZ_F16;
  a.layout = b.hnd ? KVFZ_LAYOUT_PAGED_HND : KVFZ_LAYOUT_PAGED_NHD;
  a.num_heads = static_cast<int32_t>(b.heads);
  a.head_dim = static_cast<int32_t>(b.head_dim);
  a.scale_kind = KVFZ_SCALE_NONE;
  char error[256] = {};
  return fn(&a, error, sizeof error) == 0;
}

// The caches after appending the whole batch in one call.
struct Caches {
  std::vector<uint16_t> k, v;
  bool operator==(const Caches& o) const { return k == o.k && v == o.v; }
};
Caches append_all(AppendFn fn, const Batch& b) {
  Caches c{b.k_cache, b.v_cache};
  append(fn, b, 0, b.tokens(), c.k, c.v);
  return c;
}

bool split_holds(AppendFn fn, const Batch& b, std::mt19937_64& rng) {
  const int64_t k = std::uniform_int_distribution<int64_t>(1, b.tokens() - 1)(rng);
  Caches two{b.k_cache, b.v_cache};
  append(fn, b, 0, k, two.k, two.v);
  append(fn, b, k, b.tokens(), two.k, two.v);
  return two == append_all(fn, b);
}

bool permute_holds(AppendFn fn, const Batch& b, std::mt19937_64& rng) {
  std::vector<int64_t> order(static_cast<size_t>(b.tokens()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Batch p = b;
  for (int64_t i = 0; i < b.tokens(); ++i) {
    const int64_t from = order[static_cast<size_t>(i)];
    p.slots[static_cast<size_t>(i)] = b.slots[static_cast<size_t>(from)];
    std::copy_n(b.key.begin() + from * b.row(), b.row(), p.key.begin() + i * b.row());
    std::copy_n(b.value.begin() + from * b.row(), b.row(), p.value.begin() + i * b.row());
  }
  return append_all(fn, p) == append_all(fn, b);
}

bool rename_holds(AppendFn fn, const Batch& b, std::mt19937_64& rng) {
  std::vector<int64_t> to(static_cast<size_t>(b.num_blocks));  // block i is renamed to[i]
  std::iota(to.begin(), to.end(), 0);
  std::shuffle(to.begin(), to.end(), rng);
  const int64_t n = b.block_elems();
  auto move_blocks = [&](const std::vector<uint16_t>& from, std::vector<uint16_t>& into) {
    for (int64_t i = 0; i < b.num_blocks; ++i)
      std::copy_n(from.begin() + (1 + i) * n, n, into.begin() + (1 + to[static_cast<size_t>(i)]) * n);
  };
  Batch r = b;
  move_blocks(b.k_cache, r.k_cache);
  move_blocks(b.v_cache, r.v_cache);
  for (int64_t& s : r.slots)
    if (s >= 0) s = to[static_cast<size_t>(s / b.block_size)] * b.block_size + s % b.block_size;
  const Caches renamed = append_all(fn, r);
  Caches expected = append_all(fn, b);
  Caches moved{expected.k, expected.v};
  move_blocks(expected.k, moved.k);
  move_blocks(expected.v, moved.v);
  return renamed == moved;
}

// In the child: returns the exit status (bit i = relation i violated; 64 + ... = setup failure).
int run_child(const std::filesystem::path& so, uint64_t seed, int64_t trials) {
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return 100;
  auto fn = reinterpret_cast<AppendFn>(dlsym(h, "kvfuzz_plugin_append"));
  if (!fn) return 101;
  int violated = 0;
  for (int64_t t = 0; t < trials; ++t) {
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(t));
    const Batch b = random_batch(rng);
    if (!split_holds(fn, b, rng)) violated |= 1;
    if (!permute_holds(fn, b, rng)) violated |= 2;
    if (!rename_holds(fn, b, rng)) violated |= 4;
  }
  return violated;
}

}  // namespace

MetamorphicResult check_metamorphic(const std::filesystem::path& so, uint64_t seed, int64_t trials) {
  MetamorphicResult r;
  r.trials = trials;
  const pid_t pid = fork();
  if (pid < 0) {
    r.error = "fork failed";
    return r;
  }
  if (pid == 0) _exit(run_child(so, seed, trials));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      r.error = "waitpid failed";
      return r;
    }
  }
  if (!WIFEXITED(status)) {
    r.error = "the checker died (signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0) + ")";
    return r;
  }
  const int code = WEXITSTATUS(status);
  if (code >= 100) {
    r.error = code == 100 ? "cannot load " + so.string() : "no kvfuzz_plugin_append in " + so.string();
    return r;
  }
  r.ran = true;
  for (int i = 0; i < 3; ++i)
    if (code & (1 << i)) r.violated.push_back(kMetamorphicRelations[i]);
  return r;
}

}  // namespace kvf
