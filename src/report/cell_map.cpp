// cell_map.cpp — see cell_map.h.
//
// The map is a fold over the classified cells of the image (arena/classify.h), the same cells the
// verdict (verdict.h) groups: each differing element of the cache and scale cache buffers lands on
// its (block, slot) with the kind and writer the classifier gave it, and the guard bands around the
// cache count the guard cells the verdict counts. Per element only integers are kept; strings are
// built once per damaged (block, slot) and once per matrix label.
#include "cell_map.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "arena/classify.h"
#include "arena/decode.h"
#include "case/placement.h"

namespace kvf {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string range_text(const char* singular, const char* plural, int64_t lo, int64_t hi) {
  if (lo == hi) return std::string(singular) + " " + num(lo);
  return std::string(plural) + " " + num(lo) + ".." + num(hi);
}

// Whose value a cell holds, as integers (labels are built at the end).
struct WriterKey {
  enum Kind : uint8_t { request, padding_row, invalid_row, graph_row, unwritten_rows, unknown, ambiguous, over_read, not_written, other };
  Kind kind = unknown;
  int64_t id = -1;  // request
  auto tie() const { return std::make_tuple(kind, id); }
  bool operator<(const WriterKey& o) const { return tie() < o.tie(); }
  bool operator==(const WriterKey& o) const { return tie() == o.tie(); }
};

std::string writer_label(const WriterKey& w) {
  switch (w.kind) {
    case WriterKey::request: return "request " + num(w.id);
    case WriterKey::padding_row: return "padding rows (slot < 0)";
    case WriterKey::invalid_row: return "invalid-slot rows";
    case WriterKey::graph_row: return "CUDA-graph padding rows";
    case WriterKey::unwritten_rows: return "unwritten rows";
    case WriterKey::unknown: return "unknown writer";
    case WriterKey::ambiguous: return "ambiguous writer";
    case WriterKey::over_read: return "over-read pattern";
    case WriterKey::not_written: return "not written";
    case WriterKey::other: return "the kernel";
  }
  return "?";
}

// Whose cell was hit.
struct VictimKey {
  enum Kind : uint8_t { request, tail, free_block, gap, hole, shared, outside };
  Kind kind = gap;
  int64_t id = -1;
  auto tie() const { return std::make_tuple(id < 0 ? INT64_MAX : id, kind); }  // requests first, own tail next to them
  bool operator<(const VictimKey& o) const { return tie() < o.tie(); }
};

std::string victim_label(const VictimKey& v) {
  switch (v.kind) {
    case VictimKey::request: return "request " + num(v.id);
    case VictimKey::tail: return "request " + num(v.id) + "'s block tails";
    case VictimKey::hole: return "request " + num(v.id) + "'s holes";
    case VictimKey::shared: return "shared prefix block " + num(v.id);
    case VictimKey::free_block: return "free blocks";
    case VictimKey::gap: return "stride gaps";
    case VictimKey::outside: return "cache outside the windows";
  }
  return "?";
}

VictimKey victim_of(const CacheCell& cell) {
  switch (cell.role) {
    case CacheCell::Role::context:
      if (cell.shared) return {VictimKey::shared, cell.block};
      return {VictimKey::request, cell.request};
    case CacheCell::Role::new_token: return {VictimKey::request, cell.request};
    case CacheCell::Role::tail: return {VictimKey::tail, cell.request};
    case CacheCell::Role::hole: return {VictimKey::hole, cell.request};
    case CacheCell::Role::free_block:
    case CacheCell::Role::sink: return {VictimKey::free_block, -1};  // never reached: sink cells are skipped
    case CacheCell::Role::gap: return {VictimKey::gap, -1};
  }
  return {};
}

// The writer key of a classified cell: decoded writers as they are; over-read patterns, missing
// writes and cells judged by location by what the classifier rests on.
WriterKey writer_of(const ImageCell& x) {
  if (x.kind == FindingKind::missing_write) return {WriterKey::not_written, -1};
  switch (x.basis) {
    case Basis::location: return {x.cell.role == CacheCell::Role::new_token ? WriterKey::other : WriterKey::unknown, -1};
    case Basis::over_read: return {WriterKey::over_read, -1};
    case Basis::not_written: return {WriterKey::not_written, -1};
    case Basis::value: break;
  }
  switch (x.value.source) {
    case ValueSource::request: return {WriterKey::request, x.value.request};
    case ValueSource::padding_row: return {WriterKey::padding_row, -1};
    case ValueSource::invalid_row: return {WriterKey::invalid_row, -1};
    case ValueSource::graph_row: return {WriterKey::graph_row, -1};
    case ValueSource::unwritten_rows: return {WriterKey::unwritten_rows, -1};
    case ValueSource::unknown: return {WriterKey::unknown, -1};
    case ValueSource::ambiguous: return {WriterKey::ambiguous, -1};
  }
  return {WriterKey::unknown, -1};
}

std::string expected_meaning(const CacheCell& cell) {
  switch (cell.role) {
    case CacheCell::Role::context:
      return "request " + num(cell.request) + "'s context token " + num(cell.token) + (cell.shared ? " (a shared prefix block)" : "");
    case CacheCell::Role::new_token: return "request " + num(cell.request) + " token " + num(cell.token) + "'s new value";
    case CacheCell::Role::tail: return "the block-tail canary (request " + num(cell.request) + ")";
    case CacheCell::Role::hole: return "the block-tail canary (request " + num(cell.request) + "'s hole, position " + num(cell.token) + ")";
    case CacheCell::Role::free_block: return "the free-block canary";
    case CacheCell::Role::sink: return "anything (the sink slot)";
    case CacheCell::Role::gap: return "the stride-gap canary";
  }
  return "?";
}

std::string found_meaning(const Case& c, const CacheFields& fields, const ImageCell& x, const WriterKey& writer) {
  if (x.kind == FindingKind::missing_write) return "its pre-run value (never written)";
  if (x.follows_scale >= 0) return "a stored code of a group whose scale differs";
  if (x.basis == Basis::location) {
    if (x.section == Section::scale_cache || (x.cell.field >= 0 && fields.field[x.cell.field].role != FieldRole::data))
      return "a stored scale (scales are judged by location only)";
    return "a stored code (quantised caches are judged by location only)";
  }
  const DecodedValue& d = x.value;
  switch (d.source) {
    case ValueSource::request:
      return "request " + num(d.request) + " token " + num(d.token) + " head " + num(d.head) + " dim " + num(d.dim) + "'s " +
             c.field_name(d.is_value) + " value (input row " + num(d.row) + ")";
    case ValueSource::padding_row:
    case ValueSource::invalid_row:
    case ValueSource::graph_row:
      if (d.row >= 0) {
        if (d.row >= c.num_slots()) return "CUDA-graph padding row " + num(d.row) + "'s value (row >= T = " + num(c.num_slots()) + ")";
        return std::string(d.source == ValueSource::padding_row ? "padding" : "invalid-slot") + " row " + num(d.row) + "'s value (slot " +
               num(c.slot_mapping[static_cast<size_t>(d.row)]) + ")";
      }
      return "the value of " + writer_label({writer.kind, -1});
    case ValueSource::unwritten_rows: return "a value only rows that must not be written hold";
    case ValueSource::ambiguous: return "a value several input elements hold";
    default: break;
  }
  if (x.tag) return canary_name(*x.tag);
  return "a value no input element holds";
}

// Per damaged (block, slot) state while scanning.
struct SlotAcc {
  SlotDamage damage;
  std::vector<WriterKey> writers;
};

}  // namespace

std::string_view to_string(SlotRole r) {
  switch (r) {
    case SlotRole::free_block: return "free";
    case SlotRole::context: return "context";
    case SlotRole::new_token: return "new";
    case SlotRole::tail: return "tail";
    case SlotRole::hole: return "hole";
    case SlotRole::shared: return "shared";
    case SlotRole::sink: return "sink";
  }
  return "?";
}

CellMap build_cell_map(const Case& c, const Verdict& verdict, const Arena& initial, const Arena& expected,
                       const Arena& actual, const OutsideDiff* outside) {
  CellMap m;
  m.num_blocks = c.cache.num_blocks;
  m.shard_blocks = c.has_cp() ? c.shard_blocks() : 0;
  m.block_size = c.cache.block_size;
  m.num_heads = c.num_heads;
  m.head_dim = c.head_dim;
  const CacheLocator loc(c);

  // Owner and role of every (block, slot).
  m.block_request.assign(static_cast<size_t>(m.num_blocks), -1);
  m.block_logical.assign(static_cast<size_t>(m.num_blocks), -1);
  m.block_cells.assign(static_cast<size_t>(m.num_blocks), 0);
  m.roles.assign(static_cast<size_t>(m.capacity()), SlotRole::free_block);
  m.shared_blocks = shared_blocks(c);
  for (int64_t b = 0; b < m.num_blocks; ++b) {
    const CacheLocator::Owner o = loc.owner(b);
    m.block_request[static_cast<size_t>(b)] = o.request;
    m.block_logical[static_cast<size_t>(b)] = o.logical;
    if (o.request < 0 || c.num_heads <= 0 || c.head_dim <= 0) continue;
    for (int64_t p = 0; p < m.block_size; ++p) {
      const CacheCell cell = loc.cell(false, b, p, 0, 0);
      SlotRole r = SlotRole::tail;
      if (cell.role == CacheCell::Role::context) r = cell.shared ? SlotRole::shared : SlotRole::context;
      if (cell.role == CacheCell::Role::new_token) r = SlotRole::new_token;
      if (cell.role == CacheCell::Role::hole) r = SlotRole::hole;
      m.roles[static_cast<size_t>(b * m.block_size + p)] = r;
    }
  }
  if (c.padding == PaddingMode::sink && m.capacity() > 0) m.roles[0] = SlotRole::sink;

  // Stride-gap elements are filed under the block whose span holds them, when blocks are the
  // outermost dimension of the cache (every layout kvfuzz generates).
  const CacheGeometry& g = c.cache;
  const bool block_major = g.stride_block > 0 && g.stride_block >= g.stride_pos && g.stride_block >= g.stride_head;
  const int64_t cache_base = std::min(c.cache_k_offset, c.cache_v_offset);
  auto gap_block = [&](int64_t e) -> int64_t {
    if (!block_major || e < cache_base) return -1;
    const int64_t b = (e - cache_base) / g.stride_block;
    return b < m.num_blocks ? b : -1;
  };

  // Differing cache and scale cache elements, and the guard bands around the cache, as the
  // classifier files them (exact values: the map marks every differing cell).
  const CacheFields fields = c.fields();
  std::map<std::pair<int64_t, int64_t>, SlotAcc> slots;       // (block, pos) -> damage
  std::map<VictimKey, std::map<WriterKey, int64_t>> matrix;  // cache cells by victim, writer
  constexpr int64_t kBandBeforeCache = 2 * static_cast<int64_t>(Section::cache);  // classify.h: 2 * section (+1 after it)
  constexpr int64_t kBandAfterCache = kBandBeforeCache + 1;
  auto on_cell = [&](const ImageCell& x) {
    if (x.section == Section::guard) {
      if (x.victim_id == kBandBeforeCache) ++m.guard_before;
      if (x.victim_id == kBandAfterCache) ++m.guard_after;
      return;
    }
    if (x.section != Section::cache && x.section != Section::scale_cache) return;
    m.differing_cache_cells += x.count;
    const CacheCell& cell = x.cell;
    const WriterKey writer = writer_of(x);
    const VictimKey victim = x.victim == Victim::many ? VictimKey{VictimKey::outside, -1} : victim_of(cell);
    matrix[victim][writer] += x.count;
    if (victim.kind == VictimKey::outside) return;  // no bits came back: nothing to draw
    const bool is_gap = cell.role == CacheCell::Role::gap;
    const int64_t block = is_gap ? (x.section == Section::cache ? gap_block(x.elem) : -1) : cell.block;
    const int64_t pos = is_gap ? -1 : cell.pos;
    if (block >= 0) ++m.block_cells[static_cast<size_t>(block)];

    auto [it, fresh] = slots.try_emplace({block, pos});
    SlotAcc& acc = it->second;
    SlotDamage& s = acc.damage;
    if (fresh) {
      s.block = block;
      s.pos = pos;
      s.worst = x.kind;
      s.key_field = c.field_name(false);
      CellDecode& f = s.first;
      f.elem = x.elem;
      f.cell = cell;
      f.field = cell.field >= 0                       ? fields.field[cell.field].name
                : x.section == Section::scale_cache ? std::string(c.field_name(cell.is_value)) + " scale"
                                                      : c.field_name(cell.is_value);
      f.kind = x.kind;
      f.scale_cache = x.section == Section::scale_cache;
      f.bytes = x.size;
      f.expected = static_cast<uint32_t>(x.expected);
      f.found = static_cast<uint32_t>(x.found);
      f.expected_meaning = expected_meaning(cell);
      f.found_meaning = found_meaning(c, fields, x, writer);
      f.victim = victim_label(victim);
      f.writer = writer_label(writer);
      f.writer_request = writer.kind == WriterKey::request ? writer.id : -1;
    }
    ++s.cells;
    if (severity(x.kind) < severity(s.worst)) s.worst = x.kind;
    if (!is_gap) {
      (cell.is_value ? s.v : s.k) = true;
      if (s.head_hi < s.head_lo) {
        s.head_lo = s.head_hi = cell.head;
        s.dim_lo = s.dim_hi = cell.dim;
      } else {
        s.head_lo = std::min(s.head_lo, cell.head);
        s.head_hi = std::max(s.head_hi, cell.head);
        s.dim_lo = std::min(s.dim_lo, cell.dim);
        s.dim_hi = std::max(s.dim_hi, cell.dim);
      }
    }
    if (std::find(acc.writers.begin(), acc.writers.end(), writer) == acc.writers.end()) {
      if (acc.writers.size() < kMaxWritersPerSlot) {
        acc.writers.push_back(writer);
      } else {
        s.more_writers = true;
      }
    }
  };
  classify_image(c, initial, expected, actual, TolerancePolicy{}, outside, on_cell);
  for (auto& [key, acc] : slots) {
    for (const WriterKey& w : acc.writers) acc.damage.writers.push_back(writer_label(w));
    m.damage.push_back(std::move(acc.damage));
  }

  // The matrix: cache cells by (victim, writer), then every finding outside the cache as it is.
  std::map<WriterKey, int> writer_col;
  for (const auto& [v, row] : matrix)
    for (const auto& [w, n] : row) writer_col.emplace(w, 0);
  for (auto& [w, col] : writer_col) {
    col = static_cast<int>(m.writers.size());
    m.writers.push_back(writer_label(w));
  }
  for (const auto& [v, row] : matrix) {
    MatrixRow r;
    r.victim = victim_label(v);
    r.cells.assign(m.writers.size(), 0);
    for (const auto& [w, n] : row) r.cells[static_cast<size_t>(writer_col[w])] = n;
    m.matrix.push_back(std::move(r));
  }
  for (const Finding& f : verdict.findings) {
    if (f.in_cache) continue;  // its cells are on the map already
    const std::string writer = f.writer.empty() ? "the kernel" : f.writer;
    auto col = std::find(m.writers.begin(), m.writers.end(), writer);
    if (col == m.writers.end()) {
      m.writers.push_back(writer);
      for (MatrixRow& r : m.matrix) r.cells.push_back(0);
      col = m.writers.end() - 1;
    }
    // A guard band is compared byte by byte: its row says so, its numbers are bytes, not cells.
    const std::string victim = (f.victim.empty() ? std::string(to_string(f.kind)) : f.victim) +
                               (f.kind == FindingKind::oob_write ? " (bytes)" : "");
    auto row = std::find_if(m.matrix.begin(), m.matrix.end(), [&](const MatrixRow& r) { return r.victim == victim; });
    if (row == m.matrix.end()) {
      m.matrix.push_back(MatrixRow{victim, std::vector<int64_t>(m.writers.size(), 0)});
      row = m.matrix.end() - 1;
    }
    row->cells[static_cast<size_t>(col - m.writers.begin())] += std::max<int64_t>(f.cells, 1);
  }
  return m;
}

namespace {

// The unit (singular) of a finding's `cells`; empty for a run that did not finish.
std::string amount_unit(FindingKind k) {
  switch (k) {
    case FindingKind::oob_write: return "byte";
    case FindingKind::input_modified: return "element";
    case FindingKind::slot_mapping_mismatch: return "entry";
    case FindingKind::invalid_slot_miscount: return "counter";
    case FindingKind::crash:
    case FindingKind::timeout:
    case FindingKind::launch_error: return "";
    default: return "cell";
  }
}

// "1 cell", "2 entries"; with `words`, "16 differing cells".
std::string amount(int64_t n, const std::string& unit, const std::string& words = "") {
  const std::string plural = unit == "entry" ? "entries" : unit + "s";
  return std::to_string(n) + " " + words + (n == 1 ? unit : plural);
}

}  // namespace

std::string finding_amount(const Finding& f) {
  const std::string unit = amount_unit(f.kind);
  return unit.empty() ? "" : amount(f.cells, unit);
}

std::string differing_total(const Verdict& v) {
  std::map<std::string, int64_t> by_unit;
  for (const Finding& f : v.findings)
    if (const std::string unit = amount_unit(f.kind); !unit.empty()) by_unit[unit] += f.cells;
  const std::vector<std::pair<std::string, std::string>> order = {
      {"cell", "differing "}, {"byte", "overwritten guard-band "}, {"element", "changed input "},
      {"entry", "wrong slot-mapping "}, {"counter", "wrong invalid-slot "}};
  std::string s;
  for (const auto& [unit, words] : order) {
    const auto it = by_unit.find(unit);
    if (it == by_unit.end() || it->second == 0) continue;
    s += (s.empty() ? "" : ", ") + amount(it->second, unit, words);
  }
  return s.empty() ? "nothing differs" : s;
}

std::filesystem::path report_dir_for(const std::filesystem::path& case_file) {
  return case_file.parent_path() / (case_file.stem().string() + ".report");
}

std::string serving_text(const Case& c) {
  std::string s;
  const auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (c.padding == PaddingMode::sink) add("padding sink (slot 0)");
  if (c.addressing == Addressing::csr) add("FlashInfer CSR addressing");
  if (c.has_window())
    add("ring: window " + std::to_string(c.window_size) + ", sinks " + std::to_string(c.window_sinks) + ", input " +
        std::string(to_string(c.window_input)));
  if (c.has_cp())
    add("context-parallel: " + std::to_string(c.cp_world_size) + " ranks, interleave " + std::to_string(c.cp_interleave) + ", input " +
        std::string(to_string(c.cp_input)));
  return s;
}

std::string describe_cell(const CellDecode& d) {
  const std::string buffer = d.scale_cache ? "scale cache element " : "cache element ";
  if (d.cell.role == CacheCell::Role::gap) return buffer + num(d.elem) + " (stride gap)";
  return d.field + " block " + num(d.cell.block) + " slot " + num(d.cell.pos) + " head " + num(d.cell.head) + " dim " +
         num(d.cell.dim) + " (" + buffer + num(d.elem) + ")";
}

std::string describe_damage(const SlotDamage& s) {
  std::ostringstream o;
  if (s.pos < 0) {
    o << (s.block >= 0 ? "block " + num(s.block) + " stride gaps" : std::string("stride gaps outside every block"));
  } else {
    o << "block " << s.block << " slot " << s.pos;
  }
  o << ": " << s.cells << (s.cells == 1 ? " cell" : " cells") << " differ (" << to_string(s.worst) << ")\n";
  if (s.head_hi >= s.head_lo)
    o << (s.k && s.v ? s.key_field + " and V" : s.v ? std::string("V") : s.key_field) << ", " << range_text("head", "heads", s.head_lo, s.head_hi) << ", "
      << range_text("dim", "dims", s.dim_lo, s.dim_hi) << "\n";
  o << "victim: " << s.first.victim << "\n";
  o << "written by: ";
  for (size_t i = 0; i < s.writers.size(); ++i) o << (i ? ", " : "") << s.writers[i];
  if (s.more_writers) o << ", ...";
  o << "\nfirst: " << describe_cell(s.first) << "\n";
  o << "  expected " << hex_bits(s.first.expected, s.first.bytes) << " = " << s.first.expected_meaning << "\n";
  o << "  found    " << hex_bits(s.first.found, s.first.bytes) << " = " << s.first.found_meaning;
  return o.str();
}

std::string case_shape_line(const Case& c) {
  std::ostringstream o;
  o << to_string(c.layout) << ", " << to_string(c.input_dtype) << " -> " << to_string(c.cache_dtype) << ", " << c.num_heads
    << (c.num_heads == 1 ? " head" : " heads") << " x " << c.head_dim << ", " << c.cache.num_blocks
    << (c.cache.num_blocks == 1 ? " block" : " blocks") << " of " << c.cache.block_size << ", " << c.requests.size()
    << (c.requests.size() == 1 ? " request, " : " requests, ") << c.num_slots() << (c.num_slots() == 1 ? " slot" : " slots")
    << " (" << to_string(c.slot_dtype) << ")";
  if (c.num_input_rows > c.num_slots()) o << ", " << c.num_input_rows << " input rows";
  if (c.num_q_heads > 0) o << ", fused QKV (" << c.num_q_heads << " Q heads)";
  return o.str();
}

nlohmann::json case_report_json(const CaseReport& r, size_t max_damage) {
  const Case& c = r.kase;
  const CellMap& m = r.map;
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : r.verdict.findings) {
    findings.push_back({{"kind", std::string(to_string(f.kind))}, {"victim", f.victim}, {"writer", f.writer},
                        {"victim_request", f.victim_request}, {"writer_request", f.writer_request}, {"where", f.where},
                        {"cells", f.cells}, {"sentence", f.sentence}, {"example", f.example}});
    if (f.victim_requests.size() > 1) findings.back()["victim_requests"] = f.victim_requests;  // a shared prefix block
  }
  nlohmann::json requests = nlohmann::json::array();
  for (const Request& q : c.requests) {
    requests.push_back({{"context_len", q.context_len}, {"new_len", q.new_len}, {"blocks", q.blocks}});
    if (!consecutive_positions(q)) requests.back()["positions"] = q.positions;
  }
  nlohmann::json damage = nlohmann::json::array();
  for (size_t i = 0; i < m.damage.size() && i < max_damage; ++i) {
    const SlotDamage& s = m.damage[i];
    const CellDecode& f = s.first;
    nlohmann::json d = {{"block", s.block}, {"slot", s.pos}, {"cells", s.cells}, {"kind", std::string(to_string(s.worst))},
                        {"victim", f.victim}, {"writers", s.writers}, {"more_writers", s.more_writers}};
    if (s.head_hi >= s.head_lo) {
      d["tensors"] = s.k && s.v ? "KV" : s.v ? "V" : s.key_field;
      d["heads"] = {s.head_lo, s.head_hi};
      d["dims"] = {s.dim_lo, s.dim_hi};
    }
    d["first"] = {{"cell", describe_cell(f)}, {"element", f.elem}, {"kind", std::string(to_string(f.kind))},
                  {"expected", hex_bits(f.expected, f.bytes)}, {"expected_meaning", f.expected_meaning},
                  {"found", hex_bits(f.found, f.bytes)}, {"found_meaning", f.found_meaning}, {"writer", f.writer}};
    damage.push_back(d);
  }
  nlohmann::json matrix = nlohmann::json::array();
  for (const MatrixRow& row : m.matrix) matrix.push_back({{"victim", row.victim}, {"cells", row.cells}});

  return {{"schema", "kvfuzz-report"},
          {"version", 1},
          {"tool_version", KVFUZZ_VERSION},
          {"case_file", r.case_file.string()},
          {"target", r.target},
          {"outcome", r.verdict.pass() ? "pass" : "fail"},
          {"first_kind", r.verdict.pass() ? std::string() : std::string(to_string(r.verdict.findings.front().kind))},
          {"ran_to_completion", r.ran},
          {"differing_cells", r.verdict.differing_cells},
          {"findings", findings},
          {"reproduce", {{"replay", r.replay_command}, {"report", r.report_command}, {"locate", r.locate_command}}},
          {"case",
           {{"summary", case_shape_line(c)},
            {"layout", std::string(to_string(c.layout))},
            {"input_dtype", std::string(to_string(c.input_dtype))},
            {"cache_dtype", std::string(to_string(c.cache_dtype))},
            {"slot_dtype", std::string(to_string(c.slot_dtype))},
            {"num_heads", c.num_heads},
            {"head_dim", c.head_dim},
            {"num_blocks", c.cache.num_blocks},
            {"block_size", c.cache.block_size},
            {"strides", {{"block", c.cache.stride_block}, {"pos", c.cache.stride_pos}, {"head", c.cache.stride_head}}},
            {"num_input_rows", c.num_input_rows},
            {"slot_mapping", c.slot_mapping},
            {"requests", requests},
            {"expect", c.expect.text()}}},
          {"map",
           {{"differing_cache_cells", m.differing_cache_cells},
            {"guard_before_cache_bytes", m.guard_before},
            {"guard_after_cache_bytes", m.guard_after},
            {"damaged_slots_total", static_cast<int64_t>(m.damage.size())},
            {"damaged_slots", damage}}},
          {"matrix", {{"writers", m.writers}, {"victims", matrix}}}};
}

}  // namespace kvf
