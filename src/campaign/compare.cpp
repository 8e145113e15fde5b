// compare.cpp — see compare.h.
#include "compare.h"
#include "jobs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "arena/windows.h"
#include "campaign.h"
#include "case/case_json.h"
#include "base/errors.h"
#include "gen/generate.h"
#include "gen/materialize.h"

namespace kvf {

namespace {

using Clock = std::chrono::steady_clock;

std::string hex(const unsigned char* p, int size) {
  std::string s = "0x";
  char buf[4];
  for (int i = size - 1; i >= 0; --i) {  // little-endian: most significant byte last in memory
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}

const char* role_name(CacheCell::Role r) {
  switch (r) {
    case CacheCell::Role::context: return "context";
    case CacheCell::Role::new_token: return "new";
    case CacheCell::Role::tail: return "block-tail";
    case CacheCell::Role::hole: return "hole";
    case CacheCell::Role::free_block: return "free block";
    case CacheCell::Role::sink: return "sink";
    case CacheCell::Role::gap: return "stride gap";
  }
  return "?";
}

// "K block 3 slot 1 head 0 dim 5; request 0's new token 4" for cache element e.
std::string cache_cell_text(const CacheLocator& loc, int64_t e) {
  const CacheCell cell = loc.locate(e);
  if (cell.role == CacheCell::Role::gap) return "a stride gap";
  std::string s = std::string(cell.is_value ? "V" : "K") + " block " + std::to_string(cell.block) + " slot " + std::to_string(cell.pos) +
                  " head " + std::to_string(cell.head) + " dim " + std::to_string(cell.dim) + "; ";
  if (cell.request < 0) return s + "free block";
  return s + "request " + std::to_string(cell.request) + "'s " + role_name(cell.role) + " token " + std::to_string(cell.token);
}

struct Located {
  std::string where;
  int elem_size = 1;
  int64_t elem_begin = 0;  // image byte offset of the element holding the byte
};

// Which section, element and (for the cache) cell an image byte belongs to.
Located locate_byte(const Case& c, const ArenaLayout& l, int64_t at) {
  struct Section {
    const char* name;
    int64_t begin, bytes;
    int size;
  };
  const Section sections[] = {{"input buffer", l.input_begin, l.input_bytes, dtype_size(c.input_dtype)},
                              {"slot_mapping", l.slots_begin, l.slots_bytes, index_type_size(c.slot_dtype)},
                              {"static scales", l.scales_begin, l.scales_bytes, 4},
                              {"cache buffer", l.cache_begin, l.cache_bytes, dtype_size(c.cache_dtype)},
                              {"scale cache buffer", l.scale_cache_begin, l.scale_cache_bytes, 4},
                              {"invalid-slot counter", l.counter_begin, 8, 8}};
  const Section* before = nullptr;  // the nearest section ending at or before `at`
  const Section* after = nullptr;   // the nearest section beginning after `at`
  for (const Section& s : sections) {
    if (at >= s.begin && at < s.begin + s.bytes) {
      const int64_t e = (at - s.begin) / s.size;
      Located out{"image byte " + std::to_string(at) + " = " + s.name + " element " + std::to_string(e), s.size, s.begin + e * s.size};
      if (&s == &sections[3]) out.where += " (" + cache_cell_text(CacheLocator(c), e) + ")";
      return out;
    }
    if (s.begin + s.bytes <= at) before = &s;
    if (s.begin > at && after == nullptr) after = &s;
  }
  // A guard band: named after the nearer section, as arena/classify.cpp does.
  const bool past = before != nullptr && (after == nullptr || at - (before->begin + before->bytes) < after->begin - at);
  const std::string band = past ? std::to_string(at - (before->begin + before->bytes)) + " bytes past the end of the " + before->name
                                 : std::to_string(after->begin - at) + " bytes before the start of the " + after->name;
  return {"image byte " + std::to_string(at) + " (guard band, " + band + ")", 1, at};
}

// The first place two finished runs of case c differ, if any.
std::optional<CompareDifference> first_difference(const Case& c, const Arena& a, const Arena& b, const IsolatedRun& ra,
                                                  const IsolatedRun& rb) {
  const ArenaLayout& l = a.layout();
  for (const ByteRange& r : a.materialized()) {
    const std::byte* pa = a.data() + r.begin;
    const std::byte* pb = b.data() + r.begin;
    if (std::memcmp(pa, pb, static_cast<size_t>(r.size())) == 0) continue;
    int64_t at = r.begin;
    while (a.data()[at] == b.data()[at]) ++at;
    const Located loc = locate_byte(c, l, at);
    const auto* ua = reinterpret_cast<const unsigned char*>(a.data() + loc.elem_begin);
    const auto* ub = reinterpret_cast<const unsigned char*>(b.data() + loc.elem_begin);
    return CompareDifference{-1, loc.where, hex(ua, loc.elem_size), hex(ub, loc.elem_size), {}};
  }
  if (!a.windowed() || ra.outside == rb.outside) return std::nullopt;
  // Windowed: the reports of the cache outside the windows differ. Name the first element on which
  // they disagree (present in one list only, or with other bits).
  const int size = dtype_size(c.cache_dtype);
  const CacheLocator loc(c);
  auto summary = [](const OutsideDiff& d) {
    return std::to_string(d.differing_elems) + " elements outside the windows differ from the fill, in " + std::to_string(d.runs_total) + " runs";
  };
  CompareDifference d{-1, "the cache outside the windows", summary(ra.outside), summary(rb.outside), {}};
  const auto& x = ra.outside.runs;
  const auto& y = rb.outside.runs;
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    if (i < x.size() && i < y.size() && x[i].begin == y[i].begin && x[i].end == y[i].end && x[i].bytes == y[i].bytes) continue;
    const int64_t e = i >= x.size() ? y[i].begin : i >= y.size() ? x[i].begin : std::min(x[i].begin, y[i].begin);
    d.where = "cache element " + std::to_string(e) + " (" + cache_cell_text(loc, e) + "), outside the windows";
    auto bits = [&](const std::vector<OutsideDiff::Run>& runs) -> std::string {
      for (const OutsideDiff::Run& run : runs) {
        if (e < run.begin || e >= run.end) continue;
        const auto off = static_cast<size_t>((e - run.begin) * size);
        return off + static_cast<size_t>(size) <= run.bytes.size() ? hex(run.bytes.data() + off, size) : "a difference whose bits were not returned";
      }
      return "its fill (no difference reported)";
    };
    d.a_found = bits(x) + "; " + d.a_found;
    d.b_found = bits(y) + "; " + d.b_found;
    break;
  }
  return d;
}

std::string status_text(const IsolatedRun& r) {
  switch (r.status) {
    case IsolatedStatus::ok: return "finished";
    case IsolatedStatus::launch_error: return "refused the launch: " + r.message;
    case IsolatedStatus::crash: return "crashed: " + r.message;
    case IsolatedStatus::timeout: return "hung: " + r.message;
    case IsolatedStatus::skip: return "skipped the case: " + r.message;
  }
  return "?";
}

struct SharedState {
  std::mutex mutex;
  int64_t next = 0;
  bool stop = false;
  CompareResult result;
  std::optional<std::pair<CompareDifference, Case>> first;  // lowest-index difference so far, with its case
};

// Cases come from --target's capabilities-aware source (as in `run`); those outside --against's
// capabilities are skipped, so neither kernel is sent a case it does not claim to support.
void compare_thread(SharedState& st, const CompareOptions& o, const CaseSource& source,
                    const std::optional<Capabilities>& against_caps, Progress& progress) {
  std::unique_ptr<Target> ta = make_target(o.target, o.target_options);
  std::unique_ptr<Target> tb = make_target(o.against, o.target_options);
  Isolator ia(*ta, o.check.isolation), ib(*tb, o.check.isolation);
  for (;;) {
    int64_t i = 0;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      if (stop_requested()) {
        st.result.interrupted = true;
        st.stop = true;
      }
      i = o.shard.case_at(st.next);  // the shard's next case: index, index + count, ...
      if (st.stop || i >= o.cases) return;
      ++st.next;
    }
    const DrawnCase drawn = source.draw(o.seed, i);
    std::string outside = drawn.outside.empty() ? "" : o.target + ": " + drawn.outside;
    if (!drawn.skipped && against_caps) {
      if (const std::string why = outside_reason(drawn.kase, *against_caps); !why.empty()) outside = o.against + ": " + why;
    }
    if (!outside.empty() && (drawn.skipped || outside.rfind(o.against + ": ", 0) == 0)) {
      std::lock_guard<std::mutex> lock(st.mutex);
      ++st.result.skipped;
      ++st.result.skip_reasons[outside];
      continue;
    }
    const Case& c = drawn.kase;
    const ArenaLayout layout = plan_arena(c);
    const Arena initial = layout.cache_bytes > o.check.isolation.windowed_above_bytes ? make_initial_arena(c, plan_windows(c, layout))
                                                                                     : make_initial_arena(c);
    Arena a = Arena::shaped_like(initial), b = Arena::shaped_like(initial);
    const IsolatedRun ra = ia.run(c, initial, a);
    const IsolatedRun rb = ib.run(c, initial, b);
    reset_sink(c, initial, a);  // the sink's contents are unconstrained: any two are the same result
    reset_sink(c, initial, b);

    std::optional<CompareDifference> diff;
    bool both_failed = false;
    if (ra.status != IsolatedStatus::ok || rb.status != IsolatedStatus::ok) {
      if (ra.status == rb.status) {
        both_failed = true;
      } else {
        diff = CompareDifference{-1, "how the run ended", status_text(ra), status_text(rb), {}};
      }
    } else {
      diff = first_difference(c, a, b, ra, rb);
    }
    std::lock_guard<std::mutex> lock(st.mutex);
    ++st.result.cases;
    if (diff) {
      diff->case_index = i;
      if (!st.first || i < st.first->first.case_index) st.first = std::make_pair(*diff, c);
      st.stop = true;
    } else if (both_failed) {
      ++st.result.both_failed;
    } else {
      ++st.result.identical;
    }
    progress.update(st.result.cases, st.result.identical + st.result.both_failed, st.first ? 1 : 0, "comparing");
  }
}

}  // namespace

CompareResult compare_targets(const CompareOptions& o, Progress& progress) {
  if (o.against.empty()) throw InputError("", "", "compare needs --against TARGET (the second target)");
  const Profile profile = o.config.empty() ? default_profile() : load_profile(o.config);
  const std::optional<Capabilities> caps_a = open_target(o.target, o.target_options)->capabilities();  // unknown: InputError; unavailable: InfraError
  const std::optional<Capabilities> caps_b = open_target(o.against, o.target_options)->capabilities();
  const CaseSource source(profile, caps_a);
  std::error_code ec;
  if (std::filesystem::exists(o.out_dir, ec) && !std::filesystem::is_directory(o.out_dir, ec))
    throw InputError(o.out_dir.string(), "", "exists and is not a directory; --out-dir expects a directory for the differing case");

  SharedState st;
  st.result.target = o.target;
  st.result.against = o.against;
  st.result.profile = profile.name;
  st.result.seed = std::to_string(o.seed);
  const auto start = Clock::now();
  run_jobs(
      o.jobs, [&] { compare_thread(st, o, source, caps_b, progress); },
      [&] {
        std::lock_guard<std::mutex> lock(st.mutex);
        st.stop = true;
      });

  CompareResult r = st.result;
  if (st.first) {
    CompareDifference d = st.first->first;
    Case c = st.first->second;
    c.expect = Expectation{};  // the contract: the case passes
    c.provenance = Provenance{std::to_string(o.seed), d.case_index, KVFUZZ_VERSION, o.command_line, o.target, target_digest(o.target)};
    d.file = save_case(c, o.out_dir);
    r.first = d;
    r.differing = 1;
    // Cases after the first difference that other threads finished are not counted as compared.
    r.cases = r.identical + r.both_failed + 1;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  return r;
}

}  // namespace kvf
