// python_worker.cpp — the persistent Python worker process (see python_worker.h; the protocol is
// in python_worker.py, which the build embeds as kPythonWorkerSource).
#include "python_worker.h"

#include "fd_io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "case/context_parallel.h"
#include "case/csr.h"
#include "base/errors.h"
#include "case/placement.h"
#include "gen/capabilities.h"
#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"
#include "python_worker_source.h"  // kPythonWorkerSource: python_worker.py, embedded by CMake
#include "targets/triton/kernel_fields.h"

extern char** environ;

namespace kvf {

namespace {

using Clock = std::chrono::steady_clock;

bool send_frame(int fd, const nlohmann::json& message) {
  const std::string text = message.dump();
  const uint32_t len = static_cast<uint32_t>(text.size());  // little-endian hosts only (x86-64, aarch64)
  return write_all(fd, &len, sizeof len) && write_all(fd, text.data(), text.size());
}

// 1 with `out` parsed, 0 EOF (or a frame that is not JSON: the worker is broken), -1 timed out.
int recv_frame(int fd, nlohmann::json& out, std::optional<Clock::time_point> deadline = std::nullopt) {
  uint32_t len = 0;
  int got = read_all(fd, &len, sizeof len, deadline);
  if (got != 1) return got;
  std::string text(len, '\0');
  got = read_all(fd, text.data(), len, deadline);
  if (got != 1) return got;
  out = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return out.is_discarded() ? 0 : 1;
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  return "ended abnormally";
}

// Reaps `pid`, killing it if it has not exited within ~1 s. Returns its wait status.
int reap(pid_t pid, bool kill_now) {
  int wstatus = 0;
  if (kill_now) kill(pid, SIGKILL);
  for (int i = 0; i < 200; ++i) {
    const pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return wstatus;
    usleep(5000);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  return wstatus;
}

bool is_executable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// `name` as a path to exec: itself if it has a slash, else found on PATH; empty if not found.
std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    if (is_executable(dir + "/" + name)) return dir + "/" + name;
    begin = end + 1;
  }
  return "";
}

}  // namespace

std::string resolve_python(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("KVFUZZ_PYTHON"); env && *env) return env;
  if (is_executable(KVFUZZ_DEFAULT_PYTHON)) return KVFUZZ_DEFAULT_PYTHON;
  return "python3";
}

std::string triton_pkg_override() {
  const char* env = std::getenv("KVFUZZ_TRITON_PKG");
  return env ? env : "";
}

std::string default_triton_pkg() { return KVFUZZ_TRITON_DIR; }

PythonWorker::PythonWorker(PythonWorkerSpec spec) : spec_(std::move(spec)) {}

PythonWorker::~PythonWorker() {
  stop();
  if (shared_) munmap(shared_, static_cast<size_t>(capacity_));
  if (memfd_ >= 0) close(memfd_);
}

void PythonWorker::grow(int64_t bytes) {
  if (memfd_ < 0) {
    memfd_ = memfd_create("kvfuzz-python-arena", MFD_CLOEXEC);
    if (memfd_ < 0) throw InfraError(errno_text("memfd_create for the Python worker's arena"));
  }
  if (bytes <= capacity_) return;
  const int64_t capacity = std::max<int64_t>({bytes, 2 * capacity_, int64_t{1} << 20});
  if (ftruncate(memfd_, capacity) != 0) throw InfraError(errno_text("sizing the Python worker's arena"));
  if (shared_) munmap(shared_, static_cast<size_t>(capacity_));
  shared_ = mmap(nullptr, static_cast<size_t>(capacity), PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (shared_ == MAP_FAILED) {
    shared_ = nullptr;
    capacity_ = 0;
    throw InfraError(errno_text("mapping the Python worker's arena"));
  }
  capacity_ = capacity;
}

const PythonHello& PythonWorker::start(double timeout_s) {
  if (pid_ > 0) return hello_;
  hello_ = PythonHello{};
  const std::string exe = find_executable(spec_.python);
  if (exe.empty()) {
    hello_ = {PythonHello::Kind::unavailable,
              "no Python interpreter \"" + spec_.python + "\" (set --python or KVFUZZ_PYTHON, or run scripts/setup-triton.sh)", {}, std::nullopt};
    return hello_;
  }
  grow(int64_t{1} << 20);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw InfraError(errno_text("socketpair for the Python worker"));

  // Everything the child needs is built before fork: it only makes async-signal-safe calls.
  nlohmann::json config = spec_.config;
  config["sock"] = fds[1];
  config["memfd"] = memfd_;
  const std::string config_text = config.dump();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv = *e;
    if (kv.rfind("TRITON_INTERPRET=", 0) == 0 || kv.rfind("PYTHONDONTWRITEBYTECODE=", 0) == 0 || kv.rfind("PYTHONUNBUFFERED=", 0) == 0)
      continue;
    env_strings.emplace_back(kv);
  }
  if (spec_.interpret) env_strings.emplace_back("TRITON_INTERPRET=1");
  env_strings.emplace_back("PYTHONDONTWRITEBYTECODE=1");  // no __pycache__ in kernel copies and user trees
  env_strings.emplace_back("PYTHONUNBUFFERED=1");         // a kernel's prints show before a crash
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg_c = "-c";
  std::string source = kPythonWorkerSource;
  std::string exe_arg = exe;
  std::vector<char*> argv = {exe_arg.data(), arg_c.data(), source.data(), const_cast<char*>(config_text.c_str()), nullptr};
  const pid_t parent = getpid();

  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw InfraError(errno_text("fork of the Python worker"));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the kvfuzz (worker) process that started it
    if (getppid() != parent) _exit(1);
    signal(SIGINT, SIG_IGN);  // kvfuzz decides when to stop; a ^C must not look like a crash
    signal(SIGTERM, SIG_IGN);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(2, 1);  // kvfuzz's stdout carries results: Python's prints go to stderr
    fcntl(fds[1], F_SETFD, 0);
    fcntl(memfd_, F_SETFD, 0);
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;
  sock_ = fds[0];

  nlohmann::json hello;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const int got = recv_frame(sock_, hello, deadline);
  if (got != 1) {
    const int wstatus = reap(pid_, /*kill_now=*/got < 0);
    close(sock_);
    pid_ = sock_ = -1;
    std::string why = got < 0 ? "said nothing within " + std::to_string(static_cast<int>(timeout_s)) + " s"
                              : describe_exit(wstatus) + " before it was ready";
    if (got == 0 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127) why = "could not be executed";
    hello_ = {PythonHello::Kind::unavailable, "the Python worker (" + exe + ") " + why, {}, std::nullopt};
    return hello_;
  }
  if (hello.value("ok", false)) {
    hello_ = {PythonHello::Kind::ready, "", hello.value("versions", nlohmann::json::object()), std::nullopt};
    if (hello.contains("capabilities")) {
      try {
        hello_.capabilities = python_capabilities(hello["capabilities"], hello.value("capabilities_from", std::string("capabilities")),
                                                  hello_.request_inputs);
        hello_.declares_layouts = hello["capabilities"].contains("layouts");
        hello_.declares_families = hello["capabilities"].contains("families");
        hello_.declares_padding_modes = hello["capabilities"].contains("padding_modes");
        hello_.declares_windows = hello["capabilities"].contains("windows");
        hello_.declares_cp_inputs = hello["capabilities"].contains("cp_inputs");
        hello_.declares_addressings = hello["capabilities"].contains("addressings");
        hello_.declares_quant_formats = hello["capabilities"].contains("quant_formats");
      } catch (const InputError& e) {
        hello_ = {PythonHello::Kind::bad_target, e.what(), {}, std::nullopt};
        stop();
      }
    }
    return hello_;
  }
  const std::string kind = hello.value("kind", "unavailable");
  hello_ = {kind == "bad_target" ? PythonHello::Kind::bad_target : PythonHello::Kind::unavailable,
            hello.value("message", std::string("the Python worker refused to start")), {}, std::nullopt};
  stop();
  return hello_;
}

void PythonWorker::stop() {
  if (pid_ < 0) return;
  close(sock_);  // a healthy worker exits on EOF
  reap(pid_, /*kill_now=*/false);
  pid_ = sock_ = -1;
}

RunResult PythonWorker::died(const std::string& what) {
  close(sock_);
  const int wstatus = reap(pid_, /*kill_now=*/false);
  pid_ = sock_ = -1;
  return {RunStatus::device_fault, "the Python worker " + describe_exit(wstatus) + " " + what};
}

RunResult PythonWorker::run(const Case& c, std::byte* image, const ArenaLayout& layout) {
  if (pid_ < 0) {
    const PythonHello& hello = start();
    if (hello.kind != PythonHello::Kind::ready) return {RunStatus::launch_error, "the Python worker cannot run: " + hello.message};
  }
  const int64_t bytes = layout.total_bytes;
  // The request structure (a function declaring "inputs": ["requests"]) after the arena image: the
  // arena ends with a guard band, so an overrun of its last section does not reach it.
  std::vector<int32_t> requests;
  RequestArrays request_arrays_of_case;
  if (hello_.request_inputs) {
    request_arrays_of_case = request_arrays(c);
    requests = request_arrays_of_case.packed();
  }
  const int64_t requests_at = (bytes + 255) / 256 * 256;
  const int64_t shared_bytes = requests.empty() ? bytes : requests_at + static_cast<int64_t>(requests.size()) * 4;
  grow(shared_bytes);
  // kvfuzz_triton runs its slot-mapping producer per rank; a function gets kvfuzz's slot mappings.
  const bool produce = spec_.config.value("mode", "") == "launch";
  if (!produce) write_reference_slot_mappings(c, image, layout);
  std::memcpy(shared_, image, static_cast<size_t>(bytes));
  auto* shared = static_cast<std::byte*>(shared_);
  if (!requests.empty()) {
    std::memset(shared + bytes, 0xFF, static_cast<size_t>(requests_at - bytes));
    std::memcpy(shared + requests_at, requests.data(), requests.size() * 4);
  }
  const bool counter = !hello_.capabilities || hello_.capabilities->invalid_slot_counter;
  nlohmann::json calls = nlohmann::json::array();
  for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
    calls.push_back(call_json(c, layout, shared, counter, rank, produce));
    calls.back()["requests"] = hello_.request_inputs ? request_arrays_of_case.offsets(requests_at) : nlohmann::json(nullptr);
  }
  const nlohmann::json request = {{"op", "run"}, {"map_bytes", capacity_}, {"image_bytes", shared_bytes}, {"calls", calls}};
  nlohmann::json reply;
  const bool answered = send_frame(sock_, request) && recv_frame(sock_, reply) == 1;
  std::memcpy(image, shared_, static_cast<size_t>(bytes));  // also what it wrote before dying
  if (!answered) return died("while running the case");
  const std::string status = reply.value("status", "");
  const std::string message = reply.value("message", "");
  if (status == "ok") {
    for (size_t i = 0; i < requests.size(); ++i) {
      int32_t now = 0;
      std::memcpy(&now, shared + requests_at + static_cast<int64_t>(i) * 4, 4);
      if (now != requests[i])
        return {RunStatus::launch_error, "the function wrote its read-only input " +
                                             request_arrays_of_case.element_name(static_cast<int64_t>(i)) + " (was " +
                                             std::to_string(requests[i]) + ", now " + std::to_string(now) + ")"};
    }
    if (!counter) add_invalid_slot_count(c, image, layout);
    return {};
  }
  if (status == "error") return {RunStatus::launch_error, message};
  if (status == "fault") {
    RunResult r = died("after a CUDA error");
    r.message = message + " (" + r.message + ")";
    return r;
  }
  return died("after an answer kvfuzz does not understand: " + reply.dump());
}

PythonHello probe_python_worker(const PythonWorkerSpec& spec) {
  static std::mutex mutex;
  static std::map<std::string, PythonHello> known;
  const std::string key = spec.python + '\n' + spec.config.dump() + (spec.interpret ? "\n1" : "\n0");
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  PythonWorker worker(spec);
  const PythonHello hello = worker.start();
  known.emplace(key, hello);
  return hello;
}

nlohmann::json call_json(const Case& c, const ArenaLayout& layout, std::byte* image, bool counter, int64_t rank,
                         bool producer) {
  // The pointers of the KvAppendParams every C++ target launches with, as offsets from the image.
  const KvAppendParams p = append_params(c, image, layout, rank);
  auto offset = [&](const void* ptr) -> nlohmann::json {
    if (ptr == nullptr) return nullptr;
    return static_cast<int64_t>(static_cast<const std::byte*>(ptr) - image);
  };
  const bool hnd = c.layout == Layout::paged_hnd || c.layout == Layout::contiguous_bhsd ||
                   c.layout == Layout::packed_content_hnd;
  const auto geometry = [](const CacheGeometry& g) -> nlohmann::json {
    return {{"num_blocks", g.num_blocks}, {"block_size", g.block_size}, {"stride_block", g.stride_block},
            {"stride_pos", g.stride_pos}, {"stride_head", g.stride_head}};
  };
  // K's and V's addressing as kvfuzz_triton's kernel takes it (every layout kvfuzz generates has one).
  const auto field = [&](bool is_value) -> nlohmann::json {
    KernelField f;
    if (const std::string why = kernel_field(append_field_layout(p, is_value), f); !why.empty()) return why;
    return {{"stride_block", f.stride_block}, {"stride_pos", f.stride_pos}, {"stride_head", f.stride_head},
            {"x", f.x}, {"stride_dim0", f.stride_dim0}, {"stride_dim1", f.stride_dim1}};
  };
  // A quantised format: its fields as kvfuzz_triton.format_api.FormatField, its conventions by name.
  nlohmann::json format = nullptr;
  if (c.has_format()) {
    const auto layout_json = [](const FieldLayout& l) -> nlohmann::json {
      FormatKernelField f;
      if (const std::string why = format_kernel_field(l, f); !why.empty()) return why;
      return {{"offset", f.offset}, {"block", f.block}, {"pos_x", f.pos_x}, {"pos0", f.pos0}, {"pos1", f.pos1},
              {"head", f.head}, {"dim_x", f.dim_x}, {"dim0", f.dim0}, {"dim1", f.dim1}};
    };
    const QuantRules& r = c.quant_rules;
    // Each stored field by the name the launch takes it under: its dtype and [blocks, block_size,
    // heads, n] extents (n: dims, or groups for scales and zero points); absent fields are left out.
    nlohmann::json stored = nlohmann::json::object();
    for (const CacheField& f : c.fields()) {
      const char* side = f.index == 0 ? "k_" : "v_";
      const std::string name = f.role == FieldRole::data && f.group == 0 ? "rope"
                               : std::string(side) + (f.role == FieldRole::data ? "codes" : f.role == FieldRole::scale ? "scales" : "zeros");
      stored[name] = {{"dtype", std::string(to_string(f.dtype))},
                      {"shape", {c.shard_blocks(), c.cache.block_size, f.num_heads, f.head_dim}}};
    }
    format = {{"name", std::string(to_string(c.quant_format))},
              {"stored", stored},
              {"rules",
               {{"nvfp4", std::string(to_string(r.nvfp4))}, {"mx", std::string(to_string(r.mx))},
                {"ds_mla", std::string(to_string(r.ds_mla))}, {"indexer", std::string(to_string(r.indexer))},
                {"asym_arith", std::string(to_string(r.asym_arith))}, {"asym_lanes", std::string(to_string(r.asym_lanes))},
                {"int4_pairing", std::string(to_string(r.int4_pairing))}}},
              {"group", p.format_group},
              {"cache", offset(p.format_cache)},
              {"cache_bytes", layout.cache_bytes},
              {"scales", offset(p.format_scales)},
              {"scales_bytes", p.format_scales == p.format_cache ? layout.cache_bytes : layout.scale_cache_bytes},
              {"k_codes", layout_json(p.code_layout[0])},
              {"v_codes", layout_json(p.code_layout[1])},
              {"k_scales", layout_json(p.scale_layout[0])},
              {"v_scales", layout_json(p.scale_layout[1])},
              {"k_zeros", layout_json(p.zero_layout[0])},
              {"v_zeros", layout_json(p.zero_layout[1])},
              {"rope", layout_json(p.rope_layout)}};
  }
  nlohmann::json cp_producer = nullptr;
  if (producer && c.cp_input == CpInput::slot_mapping) {
    const CpSlotMappingParams q = cp_producer_params(c, image, layout, rank);
    cp_producer = {{"positions", offset(q.positions)}, {"requests", offset(q.requests)},
                   {"block_tables", offset(q.block_tables)}, {"table_width", q.table_width},
                   {"num_rows", q.num_rows}, {"block_size", q.block_size}, {"rank", q.rank},
                   {"world_size", q.world_size}, {"interleave", q.interleave}, {"slot_mapping", offset(q.slot_mapping)}};
  }
  return {
      {"input_dtype", std::string(to_string(c.input_dtype))},
      {"cache_dtype", std::string(to_string(c.cache_dtype))},
      {"slot_dtype", std::string(to_string(c.slot_dtype))},
      {"layout", c.layout == Layout::vllm_legacy ? "vllm_legacy" : hnd ? "hnd" : "nhd"},
      {"num_slots", p.num_slots},
      {"num_input_rows", p.num_input_rows},
      {"num_heads", p.num_heads},
      {"head_dim", p.head_dim},
      {"key", {{"offset", offset(p.key)}, {"stride_token", p.key_stride_token}, {"stride_head", p.key_stride_head}}},
      {"value", {{"offset", offset(p.value)}, {"stride_token", p.value_stride_token}, {"stride_head", p.value_stride_head}}},
      {"slot_mapping", offset(p.slot_mapping)},
      {"k_cache", offset(p.k_cache)},
      {"v_cache", offset(p.v_cache)},
      {"cache", geometry(p.cache)},
      {"family", std::string(to_string(c.family))},
      {"has_value", p.has_value},
      {"value_head_dim", value_dim(p)},
      {"value_cache", geometry(value_geometry(p))},
      {"rope",
       p.rope == nullptr ? nlohmann::json(nullptr)
                         : nlohmann::json{{"offset", offset(p.rope)}, {"stride_token", p.rope_stride_token},
                                          {"stride_head", p.rope_stride_head}}},
      {"rope_dim", p.rope_dim},
      // FlashInfer's CSR addressing: int32 arrays instead of slot_mapping (null for slot_mapping).
      {"csr",
       p.csr_batch_indices == nullptr
           ? nlohmann::json(nullptr)
           : nlohmann::json{{"batch_indices", offset(p.csr_batch_indices)}, {"positions", offset(p.csr_positions)},
                            {"kv_indices", offset(p.csr_kv_indices)}, {"kv_indptr", offset(p.csr_kv_indptr)},
                            {"kv_last_page_len", offset(p.csr_kv_last_page_len)}, {"batch_size", p.csr_batch_size},
                            {"num_kv_indices", static_cast<int64_t>(csr_arrays(c).kv_indices.size())}}},
      {"window",
       p.window_positions == nullptr
           ? nlohmann::json(nullptr)
           : nlohmann::json{{"positions", offset(p.window_positions)}, {"seq_lens", offset(p.window_seq_lens)},
                            {"size", p.window_size}, {"sinks", p.window_sinks}}},
      // A context-parallel rank that localises its tokens itself (input positions): int32 global
      // positions and the rank's (rank, N, I); null otherwise.
      {"cp",
       p.cp_positions == nullptr
           ? nlohmann::json(nullptr)
           : nlohmann::json{{"positions", offset(p.cp_positions)}, {"rank", p.cp_rank},
                            {"world_size", p.cp_world_size}, {"interleave", p.cp_interleave}}},
      // A ring (any window input): its size and sinks, for a function that wants them; else null.
      {"ring", c.has_window() ? nlohmann::json{{"size", c.window_size}, {"sinks", c.window_sinks}} : nlohmann::json(nullptr)},
      // A context-parallel rank (either input): rank, world_size, interleave; else null.
      {"shard", c.has_cp() ? nlohmann::json{{"rank", rank}, {"world_size", c.cp_world_size}, {"interleave", c.cp_interleave}}
                           : nlohmann::json(nullptr)},
      {"cp_producer", cp_producer},
      // A quantised format (null: none): {name, rules {nvfp4, mx, ds_mla, indexer, asym_arith,
      // asym_lanes, int4_pairing}, cache, scales (byte offsets of the two buffers), k_codes, v_codes,
      // k_scales, v_scales, k_zeros, v_zeros, rope: fields as FormatField (or a string: why not)}.
      {"format", format},
      {"k_field", field(false)},
      {"v_field", field(true)},
      {"invalid_slots", counter ? offset(p.invalid_slots) : nullptr},
      {"scale_kind", std::string(to_string(c.scale_kind))},
      {"num_scales", static_scale_count(c.scale_kind, c.num_heads, p.cache.num_blocks)},  // the rank's shard's
      {"k_scale", offset(p.k_scale)},
      {"v_scale", offset(p.v_scale)},
      {"k_scale_cache", offset(p.k_scale_cache)},
      {"v_scale_cache", offset(p.v_scale_cache)},
      {"scale_cache",
       {{"stride_block", p.scale_cache.stride_block}, {"stride_pos", p.scale_cache.stride_pos},
        {"stride_head", p.scale_cache.stride_head}}},
  };
}

RequestArrays request_arrays(const Case& c) {
  RequestArrays r;
  const CsrArrays rows = csr_arrays(c);  // per row: the owner of its slot's block and the slot's position
  r.batch_indices = rows.batch_indices;
  r.positions = rows.positions;
  for (const Request& q : c.requests) {
    r.seq_lens.push_back(static_cast<int32_t>(std::max(q.context_len, written_extent(q))));
    r.context_lens.push_back(static_cast<int32_t>(q.context_len));
  }
  const CpTables tables = cp_tables(c);
  r.block_tables = tables.blocks;
  r.table_width = tables.width;
  return r;
}

std::vector<int32_t> RequestArrays::packed() const {
  std::vector<int32_t> out;
  for (const std::vector<int32_t>* a : {&batch_indices, &positions, &seq_lens, &context_lens, &block_tables})
    out.insert(out.end(), a->begin(), a->end());
  return out;
}

nlohmann::json RequestArrays::offsets(int64_t at) const {
  nlohmann::json j;
  int64_t next = at;
  const std::pair<const char*, const std::vector<int32_t>*> arrays[] = {
      {"batch_indices", &batch_indices}, {"positions", &positions}, {"seq_lens", &seq_lens},
      {"context_lens", &context_lens}, {"block_tables", &block_tables}};
  for (const auto& [name, a] : arrays) {
    j[name] = next;
    next += static_cast<int64_t>(a->size()) * 4;
  }
  j["batch_size"] = static_cast<int64_t>(seq_lens.size());
  j["table_width"] = table_width;
  return j;
}

std::string RequestArrays::element_name(int64_t i) const {
  const std::pair<const char*, const std::vector<int32_t>*> arrays[] = {
      {"batch_indices", &batch_indices}, {"positions", &positions}, {"seq_lens", &seq_lens},
      {"context_lens", &context_lens}, {"block_tables", &block_tables}};
  for (const auto& [name, a] : arrays) {
    const auto n = static_cast<int64_t>(a->size());
    if (i < n) {
      if (a == &block_tables) return std::string(name) + "[" + std::to_string(i / table_width) + ", " + std::to_string(i % table_width) + "]";
      return std::string(name) + "[" + std::to_string(i) + "]";
    }
    i -= n;
  }
  return "?";
}

Capabilities python_capabilities(const nlohmann::json& declared, const std::string& where, bool& request_inputs) {
  request_inputs = false;
  // capabilities_from_json knows the keys plugins share; an unknown key's message names this one too.
  const auto parse = [&](const nlohmann::json& j) {
    try {
      return capabilities_from_json(j, where);
    } catch (const InputError& e) {
      if (e.message().rfind("unknown key", 0) != 0) throw;
      throw InputError(e.file(), e.json_path(), e.message() + ", and (Python functions only) inputs");
    }
  };
  if (!declared.is_object() || !declared.contains("inputs")) return parse(declared);
  const nlohmann::json& v = declared.at("inputs");
  const std::string expected = "a list of the optional inputs a Python function takes: \"requests\" (batch_indices, "
                               "positions, seq_lens, context_lens, block_tables)";
  if (!v.is_array()) throw InputError(where, "/inputs", "expected " + expected);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get<std::string>() != "requests")
      throw InputError(where, "/inputs/" + std::to_string(i), v[i].dump() + " is not one of " + expected);
    request_inputs = true;
  }
  nlohmann::json rest = declared;
  rest.erase("inputs");
  return parse(rest);
}

}  // namespace kvf
