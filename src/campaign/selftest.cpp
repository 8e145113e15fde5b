// selftest.cpp — see selftest.h.
#include "selftest.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "metamorphic.h"
#include "base/errors.h"
#include "report/junit.h"

extern char** environ;

#ifndef KVFUZZ_SOURCE_DIR
#define KVFUZZ_SOURCE_DIR "."
#endif
#ifndef KVFUZZ_CXX
#define KVFUZZ_CXX "c++"
#endif
#ifndef KVFUZZ_CUDA_INCLUDE
#define KVFUZZ_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

namespace kvf {

namespace fs = std::filesystem;

const char* to_string(MutantStatus s) {
  switch (s) {
    case MutantStatus::killed: return "killed";
    case MutantStatus::survived: return "SURVIVED";
    case MutantStatus::weak: return "WEAK";
    case MutantStatus::stale: return "STALE";
    case MutantStatus::error: return "ERROR";
    case MutantStatus::skipped: return "skipped";
  }
  return "?";
}

int64_t SelftestResult::passed() const {
  return std::count_if(mutants.begin(), mutants.end(), [](const MutantResult& m) { return m.status == MutantStatus::killed; });
}
int64_t SelftestResult::skipped() const {
  return std::count_if(mutants.begin(), mutants.end(), [](const MutantResult& m) { return m.status == MutantStatus::skipped; });
}
int64_t SelftestResult::failed() const {
  const bool clean_failed = clean_checked && (!clean_violations.empty() || !clean_error.empty());
  return static_cast<int64_t>(mutants.size()) - passed() - skipped() + clean_failed;
}
bool SelftestResult::stale() const {
  return std::any_of(mutants.begin(), mutants.end(), [](const MutantResult& m) { return m.status == MutantStatus::stale; });
}
bool SelftestResult::infra_error() const {
  return std::any_of(mutants.begin(), mutants.end(), [](const MutantResult& m) { return m.status == MutantStatus::error; });
}
double SelftestResult::median_cases_to_kill() const {
  std::vector<int64_t> v;
  for (const MutantResult& m : mutants)
    if (m.status == MutantStatus::killed) v.push_back(m.cases_to_kill);
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? static_cast<double>(v[n / 2]) : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Last non-empty line of a file (for error details).
std::string last_line(const fs::path& file) {
  std::istringstream in(read_text(file));
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Runs argv with `env` added to the environment, stdout and stderr to files. Returns the exit code
// (128 + signal for a signal), or -1 when the program could not be started.
int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& out,
                const fs::path& err) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    bool overridden = false;
    for (const std::string& x : env) overridden = overridden || s.compare(0, x.find('=') + 1, x.substr(0, x.find('=') + 1)) == 0;
    if (!overridden) env_strings.push_back(s);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// FNV-1a, 64 bit: names the plugin cache entries.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Context {
  SelftestOptions o;
  MutantCatalogue catalogue;
  std::mutex progress_mutex;
  Progress* progress = nullptr;
  void event(const std::string& line) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    progress->event(line);
  }
};

// Compiles the rewritten CUDA sources in `src` into a host plugin, cached under work/plugins/ by a
// hash of the sources, the adapter and the command. Returns the .so; sets the result's build fields
// or, on failure, its status and detail.
fs::path build_plugin(Context& ctx, const fs::path& src, MutantResult& r) {
  const fs::path adapter = ctx.o.source_dir / "examples/plugins/cuda/plugin.cpp";
  if (!fs::exists(adapter)) {
    r.status = MutantStatus::error;
    r.detail = "the host plugin adapter " + adapter.string() + " does not exist";
    return {};
  }
  const std::vector<std::string> flags = {"-std=c++20", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                                          "-fvisibility-inlines-hidden", "-isystem", KVFUZZ_CUDA_INCLUDE,
                                          "-I" + (ctx.o.source_dir / "include").string()};
  Fnv h;
  h.add(ctx.o.cxx);
  for (const std::string& f : flags) h.add(f);
  h.add(read_text(adapter));
  h.add(read_text(ctx.o.source_dir / "include/kvfuzz_plugin.h"));
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(src))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    h.add(f.filename().string());
    h.add(read_text(f));
  }
  const fs::path cache = ctx.o.work_dir / "plugins";
  fs::create_directories(cache);
  const fs::path so = fs::absolute(cache / (h.hex() + ".so"));
  if (fs::exists(so)) {
    r.build_cached = true;
    return so;
  }
  const auto start = std::chrono::steady_clock::now();
  const fs::path tmp = so.string() + ".tmp" + std::to_string(getpid()) + "-" + r.rule.name;
  std::vector<std::string> argv = {ctx.o.cxx};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-I" + src.string(), adapter.string(), (src / "kv_append_emu.cpp").string(), "-o", tmp.string()});
  const fs::path log = src.parent_path() / "build.log";
  const int rc = run_process(argv, {}, log, log);
  r.build_seconds = since(start);
  if (rc != 0) {
    fs::remove(tmp);
    r.status = MutantStatus::error;
    r.detail = rc < 0 ? "cannot run the compiler " + ctx.o.cxx + " (--cxx or $CXX chooses another)"
                      : "the mutant does not compile (" + log.string() + "): " + last_line(log);
    return {};
  }
  fs::rename(tmp, so);
  return so;
}

// Everything about one rule: rewrite, build, campaign, replays.
MutantResult check_mutant(Context& ctx, const MutantRule& rule) {
  MutantResult r;
  r.rule = rule;
  r.target = rule.kernel == MutantKernel::cuda ? "plugin" : "triton-interp";
  if (!rule.gpu_only.empty()) {
    r.status = MutantStatus::skipped;
    r.detail = "GPU only: " + rule.gpu_only + " (scripts/gpu/selftest-gpu.sh)";
    return r;
  }
  const fs::path dir = fs::absolute(ctx.o.work_dir / "mutants" / rule.name);
  fs::remove_all(dir);
  fs::create_directories(dir);

  // Rewritten sources, and the mutant and clean targets.
  std::string mutant_target, clean_target;
  std::vector<std::string> env;
  try {
    if (rule.kernel == MutantKernel::cuda) {
      apply_rule(ctx.catalogue, rule, ctx.o.source_dir / "kernels/cuda", dir / "src");
      const fs::path so = build_plugin(ctx, dir / "src", r);
      if (so.empty()) return r;
      mutant_target = "plugin:" + so.string();
      clean_target = "cuda-emu";
    } else {
      apply_rule(ctx.catalogue, rule, ctx.o.source_dir / "kernels/triton/kvfuzz_triton", dir / "pkg/kvfuzz_triton");
      env.push_back("KVFUZZ_TRITON_PKG=" + (dir / "pkg").string());
      mutant_target = clean_target = "triton-interp";
    }
  } catch (const InputError& e) {
    r.status = MutantStatus::stale;
    r.detail = e.what();
    return r;
  }

  // Metamorphic relations the rule names must each be violated (checked on the plugin, no golden model).
  auto check_relations = [&]() -> bool {
    if (rule.metamorphic.empty()) return true;
    const MetamorphicResult m = check_metamorphic(mutant_target.substr(7), ctx.o.seed, ctx.o.metamorphic_trials);
    r.metamorphic_caught = m.violated;
    if (!m.ran) {
      r.status = MutantStatus::error;
      r.detail = "metamorphic checks: " + m.error;
      return false;
    }
    for (const std::string& want : rule.metamorphic) {
      if (std::find(m.violated.begin(), m.violated.end(), want) == m.violated.end()) {
        r.status = MutantStatus::weak;
        r.detail = "the metamorphic relation " + want + " held in all " + std::to_string(m.trials) + " trials";
        return false;
      }
    }
    return true;
  };
  if (ctx.o.metamorphic_only) {
    if (check_relations()) r.status = MutantStatus::killed;
    for (const std::string& x : r.metamorphic_caught) r.kind += (r.kind.empty() ? "relations " : ", ") + x;
    return r;
  }

  std::vector<std::string> common = {"--target", mutant_target, "--timeout", std::to_string(ctx.o.timeout_s)};
  if (!ctx.o.python.empty() && rule.kernel == MutantKernel::triton) common.insert(common.end(), {"--python", ctx.o.python});
  std::vector<std::string> argv = {ctx.o.self.string(), "run"};
  argv.insert(argv.end(), common.begin(), common.end());
  argv.insert(argv.end(), {"--cases", std::to_string(rule.max_cases), "--seed", std::to_string(ctx.o.seed), "--corpus-out",
                           (dir / "found").string(), "--json", (dir / "summary.json").string()});
  if (!rule.config.empty()) argv.insert(argv.end(), {"--config", (ctx.o.source_dir / rule.config).string()});
  const auto start = std::chrono::steady_clock::now();
  const int rc = run_process(argv, env, dir / "run.out", dir / "run.err");
  r.seconds = since(start);
  if (rc == 0) {
    r.status = MutantStatus::survived;
    r.detail = "no failure in " + std::to_string(rule.max_cases) + " cases (seed " + std::to_string(ctx.o.seed) + ")";
    return r;
  }
  if (rc != 1) {
    r.status = MutantStatus::error;
    r.detail = "kvfuzz run exited " + std::to_string(rc) + " (" + (dir / "run.err").string() + "): " + last_line(dir / "run.err");
    return r;
  }

  nlohmann::json s;
  try {
    s = nlohmann::json::parse(read_text(dir / "summary.json"));
  } catch (const std::exception& e) {
    r.status = MutantStatus::error;
    r.detail = "unreadable campaign summary " + (dir / "summary.json").string();
    return r;
  }
  if (!s.contains("failures") || s["failures"].empty()) {
    r.status = MutantStatus::error;
    r.detail = "the campaign exited 1 without a failure in its summary";
    return r;
  }
  const nlohmann::json& f = s["failures"][0];
  r.kind = f["findings"].empty() ? "" : f["findings"][0].value("kind", "");
  r.detail = f["findings"].empty() ? "" : f["findings"][0].value("sentence", "");
  r.cases_to_kill = f.value("case_index", int64_t{-1}) + 1;
  r.requests = f["size"].value("requests", int64_t{0});
  r.tokens = f["size"].value("slots", int64_t{0});
  r.heads = f["size"].value("heads", int64_t{0});
  r.head_dim = f["size"].value("head_dim", int64_t{0});
  r.case_file = f.value("file", "");
  r.status = MutantStatus::weak;
  if (std::find(rule.expect.begin(), rule.expect.end(), r.kind) == rule.expect.end()) {
    r.detail = "caught as " + r.kind + ", which is not among the rule's expected kinds; " + r.detail;
    return r;
  }
  if (f.value("flaky", false)) {
    r.detail = "the failure did not reproduce on every confirmation run (flaky)";
    return r;
  }

  // On the mutant the saved case must fail as it records (--expect-saved: exit 0); on the clean
  // kernel, replayed as a user would, it must pass (exit 0: the bug is gone).
  std::vector<std::string> replay = {ctx.o.self.string(), "replay", r.case_file.string(), "--expect-saved"};
  replay.insert(replay.end(), common.begin(), common.end());
  std::vector<std::string> limits;
  if (rule.max_case_mib > 0) limits = {"--max-case-mib", std::to_string(rule.max_case_mib)};
  replay.insert(replay.end(), limits.begin(), limits.end());
  if (const int rm = run_process(replay, env, dir / "replay-mutant.out", dir / "replay-mutant.err"); rm != 0) {
    r.detail = "the saved case does not replay as its failure on the mutant (exit " + std::to_string(rm) + ")";
    return r;
  }
  std::vector<std::string> clean = {ctx.o.self.string(), "replay", r.case_file.string(), "--target", clean_target};
  clean.insert(clean.end(), limits.begin(), limits.end());
  if (!ctx.o.python.empty() && rule.kernel == MutantKernel::triton) clean.insert(clean.end(), {"--python", ctx.o.python});
  if (const int rc2 = run_process(clean, {}, dir / "replay-clean.out", dir / "replay-clean.err"); rc2 != 0) {
    r.detail = "the saved case should pass on the clean kernel (" + clean_target + ") but its replay exited " +
               std::to_string(rc2);
    return r;
  }
  if (!check_relations()) return r;
  r.status = MutantStatus::killed;
  return r;
}

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

SelftestResult run_selftest(const SelftestOptions& options, Progress& progress) {
  const auto start = std::chrono::steady_clock::now();
  Context ctx;
  ctx.o = options;
  ctx.progress = &progress;
  if (ctx.o.source_dir.empty()) ctx.o.source_dir = KVFUZZ_SOURCE_DIR;
  ctx.o.source_dir = fs::absolute(ctx.o.source_dir);
  if (ctx.o.catalogue.empty()) ctx.o.catalogue = ctx.o.source_dir / "tests/mutants/mutants.json";
  if (ctx.o.self.empty()) ctx.o.self = fs::read_symlink("/proc/self/exe");
  if (ctx.o.cxx.empty()) {
    const char* env = std::getenv("CXX");
    ctx.o.cxx = env && *env ? env : KVFUZZ_CXX;
  }
  ctx.o.work_dir = fs::absolute(ctx.o.work_dir);
  for (const std::string& t : ctx.o.targets)
    if (t != "plugin" && t != "triton-interp")
      throw InputError("", "", "selftest --target: expected plugin (the CUDA mutants) or triton-interp, got " + t);
  ctx.catalogue = read_mutant_catalogue(ctx.o.catalogue);

  std::vector<const MutantRule*> selected;
  for (const MutantRule& rule : ctx.catalogue.rules) {
    const std::string target = rule.kernel == MutantKernel::cuda ? "plugin" : "triton-interp";
    if (!ctx.o.targets.empty() && std::find(ctx.o.targets.begin(), ctx.o.targets.end(), target) == ctx.o.targets.end()) continue;
    if (!ctx.o.filter.empty() && rule.name.find(ctx.o.filter) == std::string::npos) continue;
    if (ctx.o.metamorphic_only && rule.metamorphic.empty()) continue;
    selected.push_back(&rule);
  }
  if (selected.empty()) throw InputError(ctx.o.catalogue.string(), "/mutants", "no rule matches --filter/--target");

  SelftestResult result;
  result.not_applicable = ctx.catalogue.not_applicable;
  result.mutants.resize(selected.size());
  if (ctx.o.list) {
    for (size_t i = 0; i < selected.size(); ++i) {
      result.mutants[i].rule = *selected[i];
      result.mutants[i].target = selected[i]->kernel == MutantKernel::cuda ? "plugin" : "triton-interp";
      result.mutants[i].status = selected[i]->gpu_only.empty() ? MutantStatus::error : MutantStatus::skipped;
      result.mutants[i].detail = selected[i]->description;
    }
    return result;
  }
  fs::create_directories(ctx.o.work_dir);

  // The metamorphic relations on the clean kernel (a plugin of the unmodified sources) must all hold.
  const bool cuda_selected = std::any_of(selected.begin(), selected.end(), [](const MutantRule* m) { return m->kernel == MutantKernel::cuda; });
  if (cuda_selected && (ctx.o.metamorphic_only || ctx.o.filter.empty())) {
    result.clean_checked = true;
    result.metamorphic_trials = ctx.o.metamorphic_trials;
    const fs::path dir = ctx.o.work_dir / "clean";
    fs::remove_all(dir);
    fs::create_directories(dir / "src");
    for (const fs::directory_entry& e : fs::directory_iterator(ctx.o.source_dir / "kernels/cuda"))
      if (e.is_regular_file()) fs::copy_file(e.path(), dir / "src" / e.path().filename());
    MutantResult build;
    build.rule.name = "clean";
    const fs::path so = build_plugin(ctx, dir / "src", build);
    if (so.empty()) {
      result.clean_error = build.detail;
    } else {
      const MetamorphicResult m = check_metamorphic(so, ctx.o.seed, ctx.o.metamorphic_trials);
      result.clean_violations = m.violated;
      result.clean_error = m.error;
    }
    ctx.event("kvfuzz: selftest: metamorphic relations on the clean kernel: " +
              (!result.clean_error.empty() ? "ERROR: " + result.clean_error
               : result.clean_violations.empty() ? std::string("all hold")
                                                 : "VIOLATED: " + result.clean_violations.front()));
  }

  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  auto worker = [&] {
    for (size_t i = next++; i < selected.size(); i = next++) {
      MutantResult r;
      try {
        r = check_mutant(ctx, *selected[i]);
      } catch (const std::exception& e) {
        r.rule = *selected[i];
        r.status = MutantStatus::error;
        r.detail = e.what();
      }
      const size_t n = ++done;
      std::string line = "kvfuzz: selftest [" + std::to_string(n) + "/" + std::to_string(selected.size()) + "] " +
                         r.rule.name + ": " + to_string(r.status);
      if (r.status == MutantStatus::killed && r.cases_to_kill == 0)
        line += " (" + r.kind + ")";
      else if (r.status == MutantStatus::killed)
        line += " after " + std::to_string(r.cases_to_kill) + " cases (" + r.kind + ", " + fixed(r.seconds, 1) + " s" +
                (r.build_cached ? ", cached build" : "") + ")";
      else
        line += ": " + r.detail;
      ctx.event(line);
      result.mutants[i] = std::move(r);
    }
  };
  const int jobs = std::max(1, std::min<int>(ctx.o.jobs, static_cast<int>(selected.size())));
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error& e) {  // the system refuses a thread: the mutants are shared out among those running
      ctx.event("kvfuzz: selftest: " + std::to_string(j) + " of " + std::to_string(jobs) + " threads (-j): " + e.what());
      break;
    }
  }
  worker();
  for (std::thread& t : threads) t.join();
  progress.finish();
  result.seconds = since(start);
  return result;
}

std::string render_selftest_table(const SelftestResult& r) {
  std::vector<std::vector<std::string>> rows = {
      {"mutant", "pattern", "target", "killed", "cases", "time (s)", "shrunk req/tok/heads/D", "finding"}};
  for (const MutantResult& m : r.mutants) {
    const bool killed = m.status == MutantStatus::killed;
    const bool has_case = (killed && m.cases_to_kill > 0) || m.status == MutantStatus::weak;
    rows.push_back({m.rule.name, m.rule.pattern, m.target,
                    killed ? "yes" : to_string(m.status),
                    has_case ? std::to_string(m.cases_to_kill) : "-",
                    m.status == MutantStatus::skipped ? "-" : fixed(m.seconds, 1),
                    has_case ? std::to_string(m.requests) + "/" + std::to_string(m.tokens) + "/" + std::to_string(m.heads) +
                                   "/" + std::to_string(m.head_dim) + (m.small() || !m.rule.needs_size.empty() ? "" : " (large)")
                             : "-",
                    has_case || killed ? m.kind : "-"});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream o;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      o << row[c];
      if (c + 1 < row.size()) o << std::string(width[c] - row[c].size() + 2, ' ');
    }
    o << "\n";
  }
  for (const MutantResult& m : r.mutants)
    if (m.status != MutantStatus::killed) o << "  " << m.rule.name << ": " << to_string(m.status) << ": " << m.detail << "\n";
  for (const MutantResult& m : r.mutants)
    if (m.status == MutantStatus::killed && !m.rule.needs_size.empty())
      o << "  " << m.rule.name << " needs size: " << m.rule.needs_size << "\n";
  if (r.clean_checked) {
    o << "metamorphic relations (split, permute, rename; " << r.metamorphic_trials << " random batches each) on the clean kernel: "
      << (!r.clean_error.empty() ? "ERROR: " + r.clean_error
          : r.clean_violations.empty() ? std::string("all hold")
                                       : "VIOLATED: " + r.clean_violations.front())
      << "\n";
  }
  for (const MutantResult& m : r.mutants) {
    if (m.rule.metamorphic.empty()) continue;
    std::string caught;
    for (const std::string& x : m.metamorphic_caught) caught += (caught.empty() ? "" : ", ") + x;
    o << "  " << m.rule.name << ": caught without the golden model by the relations " << (caught.empty() ? "(none)" : caught) << "\n";
  }
  if (!r.not_applicable.empty()) {
    o << "patterns without a mutant:\n";
    for (const PatternWithoutMutant& p : r.not_applicable) o << "  " << p.pattern << ": " << p.why << "\n";
  }
  int64_t small = 0, killed = 0;
  for (const MutantResult& m : r.mutants) {
    if (m.status != MutantStatus::killed) continue;
    ++killed;
    small += m.cases_to_kill > 0 && m.small();
  }
  o << "kvfuzz: selftest: " << killed << " of " << (r.mutants.size() - r.skipped()) << " mutants killed"
    << (r.skipped() ? ", " + std::to_string(r.skipped()) + " GPU-only skipped" : "") << "; median cases to kill "
    << fixed(r.median_cases_to_kill(), 1) << "; " << small << " shrunk to <= 2 requests and <= 8 tokens; "
    << fixed(r.seconds, 1) << " s\n";
  return o.str();
}

nlohmann::json selftest_json(const SelftestResult& r, const std::string& command_line) {
  nlohmann::json mutants = nlohmann::json::array();
  for (const MutantResult& m : r.mutants) {
    nlohmann::json j = {{"mutant", m.rule.name}, {"pattern", m.rule.pattern}, {"kernel", to_string(m.rule.kernel)},
                        {"target", m.target}, {"status", to_string(m.status)}, {"killed", m.status == MutantStatus::killed},
                        {"detail", m.detail}, {"seconds", m.seconds}, {"build_seconds", m.build_seconds},
                        {"build_cached", m.build_cached}};
    if (m.status == MutantStatus::killed || m.status == MutantStatus::weak) {
      j["first_kind"] = m.kind;
      j["cases_to_kill"] = m.cases_to_kill;
      j["shrunk"] = {{"requests", m.requests}, {"slots", m.tokens}, {"heads", m.heads}, {"head_dim", m.head_dim}};
      j["file"] = m.case_file.string();
    }
    if (!m.rule.needs_size.empty()) j["needs_size"] = m.rule.needs_size;
    if (!m.rule.metamorphic.empty()) j["metamorphic_caught"] = m.metamorphic_caught;
    mutants.push_back(j);
  }
  nlohmann::json na = nlohmann::json::array();
  for (const PatternWithoutMutant& p : r.not_applicable) na.push_back({{"pattern", p.pattern}, {"why", p.why}});
  return {{"schema", "kvfuzz-selftest"}, {"version", 1}, {"tool_version", KVFUZZ_VERSION}, {"command", "selftest"},
          {"command_line", command_line}, {"passed", r.passed()}, {"failed", r.failed()}, {"skipped", r.skipped()},
          {"median_cases_to_kill", r.median_cases_to_kill()}, {"seconds", r.seconds}, {"mutants", mutants},
          {"not_applicable", na},
          {"metamorphic_clean", r.clean_checked ? nlohmann::json{{"trials", r.metamorphic_trials}, {"violated", r.clean_violations}, {"error", r.clean_error}}
                                                : nlohmann::json()}};
}

std::string selftest_junit(const SelftestResult& r, const std::string& command_line) {
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"kvfuzz\" tests=\"" << r.mutants.size() << "\" failures=\"" << r.failed() << "\" errors=\"0\" time=\""
    << fixed(r.seconds, 3) << "\">\n";
  o << "  <testsuite name=\"selftest\" tests=\"" << r.mutants.size() << "\" failures=\"" << r.failed() << "\" errors=\"0\" skipped=\""
    << r.skipped() << "\" time=\"" << fixed(r.seconds, 3) << "\">\n";
  o << "    <properties>\n      <property name=\"command_line\" value=\"" << xml_escape(command_line) << "\"/>\n    </properties>\n";
  for (const MutantResult& m : r.mutants) {
    o << "    <testcase classname=\"kvfuzz.selftest." << xml_escape(m.target) << "\" name=\"" << xml_escape(m.rule.name + " (" + m.rule.pattern + ")")
      << "\" time=\"" << fixed(m.seconds, 3) << "\">";
    if (m.status == MutantStatus::skipped) {
      o << "<skipped message=\"" << xml_escape(m.detail) << "\"/>";
    } else if (m.status != MutantStatus::killed) {
      o << "<failure message=\"" << xml_escape(std::string(to_string(m.status)) + ": " + m.detail) << "\" type=\""
        << to_string(m.status) << "\">" << xml_escape(m.rule.description) << "</failure>";
    }
    o << "</testcase>\n";
  }
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace kvf
