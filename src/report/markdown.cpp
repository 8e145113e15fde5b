// markdown.cpp — see markdown.h.
#include "markdown.h"

#include <sstream>

#include "case/placement.h"
#include "render.h"

namespace kvf {

namespace {

std::string code(const std::string& s) {
  // A code span whose fence is longer than any backtick run inside.
  size_t run = 0, longest = 0;
  for (char ch : s) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  return fence + (s.find('`') != std::string::npos ? " " + s + " " : s) + fence;
}

std::string fenced(const std::string& s) { return "```sh\n" + s + "\n```\n"; }

std::string first_kind(const Verdict& v) { return v.pass() ? "pass" : std::string(to_string(v.findings.front().kind)); }

void findings_list(std::ostringstream& o, const Verdict& v) {
  for (const Finding& f : v.findings) o << "- **" << to_string(f.kind) << "**: " << markdown_escape(f.sentence) << "\n";
}

}  // namespace

std::string markdown_escape(const std::string& text) {
  std::string s;
  s.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '|': case '*': case '`': case '[': case ']': case '\\': case '<':
        s += '\\';
        s += ch;
        break;
      case '\n': s += ' '; break;
      default: s += ch;
    }
  }
  return s;
}

std::string render_report_markdown(const CaseReport& r, size_t max_slots) {
  const Case& c = r.kase;
  const CellMap& m = r.map;
  std::ostringstream o;
  o << "# kvfuzz report: " << (r.verdict.pass() ? "PASS" : "FAIL " + first_kind(r.verdict)) << "\n\n";
  o << "Case " << code(r.case_file.string()) << " on target " << code(r.target) << ": " << markdown_escape(case_shape_line(c))
    << ".\n\n";
  if (!r.ran) o << "The run did not finish; the map shows the memory image as the kernel left it.\n\n";

  o << "## Findings\n\n";
  if (r.verdict.pass()) {
    o << "None: every byte of the arena matches the golden model.\n\n";
  } else {
    findings_list(o, r.verdict);
    o << "\n" << markdown_escape(differing_total(r.verdict)) << " in all. First cell: "
      << markdown_escape(r.verdict.findings.front().example) << "\n\n";
  }

  o << "## Reproduce\n\n" << fenced(r.replay_command + "\n" + r.report_command) << "\n";
  if (!r.locate_command.empty()) o << "Where it crashed (one process, under a tool that prints the place):\n\n" << fenced(r.locate_command) << "\n";

  if (!m.matrix.empty()) {
    o << "## Victim × writer\n\nDiffering elements by whose cell was hit (rows) and whose value landed there (columns).\n\n";
    o << "| victim ↓ writer → |";
    for (const std::string& w : m.writers) o << " " << markdown_escape(w) << " |";
    o << "\n|---|";
    for (size_t i = 0; i < m.writers.size(); ++i) o << "--:|";
    o << "\n";
    for (const MatrixRow& row : m.matrix) {
      o << "| " << markdown_escape(row.victim) << " |";
      for (int64_t n : row.cells) o << " " << (n ? std::to_string(n) : std::string()) << " |";
      o << "\n";
    }
    o << "\n";
  }

  if (!m.damage.empty()) {
    o << "## Damaged cache slots\n\n";
    o << "| block | slot | kind | victim | written by | cells | first cell | expected | found |\n";
    o << "|--:|--:|---|---|---|--:|---|---|---|\n";
    for (size_t i = 0; i < m.damage.size() && i < max_slots; ++i) {
      const SlotDamage& s = m.damage[i];
      std::string writers;
      for (size_t k = 0; k < s.writers.size(); ++k) writers += (k ? ", " : "") + s.writers[k];
      if (s.more_writers) writers += ", ...";
      o << "| " << (s.block >= 0 ? m.block_name(s.block) : "–") << " | " << (s.pos >= 0 ? std::to_string(s.pos) : "gap")
        << " | " << to_string(s.worst) << " | " << markdown_escape(s.first.victim) << " | " << markdown_escape(writers) << " | "
        << s.cells << " | " << markdown_escape(describe_cell(s.first)) << " | " << hex_bits(s.first.expected, s.first.bytes) << " "
        << markdown_escape(s.first.expected_meaning) << " | " << hex_bits(s.first.found, s.first.bytes) << " "
        << markdown_escape(s.first.found_meaning) << " |\n";
    }
    if (m.damage.size() > max_slots) o << "\n… and " << (m.damage.size() - max_slots) << " more damaged slots (report.json lists them).\n";
    o << "\n";
  }
  if (m.guard_before || m.guard_after)
    o << "Guard bands around the cache: " << m.guard_before << " bytes before and " << m.guard_after << " bytes after it differ.\n\n";

  o << "## Case\n\n";
  o << "| | |\n|---|---|\n";
  o << "| layout | " << to_string(c.layout) << " |\n";
  o << "| dtypes | input " << to_string(c.input_dtype) << ", cache " << to_string(c.cache_dtype) << ", slots "
    << to_string(c.slot_dtype) << " |\n";
  o << "| heads × head_dim | " << c.num_heads << " × " << c.head_dim << " |\n";
  o << "| blocks × block_size | " << c.cache.num_blocks << " × " << c.cache.block_size
    << (c.has_cp() ? " (" + std::to_string(c.num_ranks()) + " shards of " + std::to_string(c.shard_blocks()) + ")" : std::string()) << " |\n";
  if (const std::string s = serving_text(c); !s.empty()) o << "| serving | " << markdown_escape(s) << " |\n";
  o << "| strides (block, pos, head) | " << c.cache.stride_block << ", " << c.cache.stride_pos << ", " << c.cache.stride_head << " |\n";
  o << "| slot_mapping | " << c.num_slots() << " entries";
  if (c.num_slots() <= 64) {
    o << ": ";
    for (int64_t i = 0; i < c.num_slots(); ++i) o << (i ? ", " : "") << c.slot_mapping[static_cast<size_t>(i)];
  }
  o << " |\n";
  o << "| expect | " << c.expect.text() << " |\n\n";
  o << "| request | context_len | new_len | blocks |\n|--:|--:|--:|---|\n";
  for (size_t i = 0; i < c.requests.size(); ++i) {
    const Request& q = c.requests[i];
    o << "| " << i << " | " << q.context_len << " | " << q.new_len << " | ";
    for (size_t b = 0; b < q.blocks.size() && b < 32; ++b) o << (b ? ", " : "") << q.blocks[b];
    if (q.blocks.size() > 32) o << ", … (" << q.blocks.size() << ")";
    if (!consecutive_positions(q)) {  // scattered placement: the new tokens' positions, in row order
      o << " (positions ";
      for (size_t k = 0; k < q.positions.size() && k < 32; ++k) o << (k ? ", " : "") << q.positions[k];
      if (q.positions.size() > 32) o << ", …";
      o << ")";
    }
    o << " |\n";
  }
  return o.str();
}

std::string campaign_summary_markdown(const CampaignResult& r) {
  std::ostringstream o;
  o << "## kvfuzz run on " << code(r.target) << ": " << (r.failed ? "❌ " + std::to_string(r.failed) + " failed" : "✅ passed")
    << "\n\n";
  o << "| cases | passed | failed | seconds | cases/s | seed | profile |\n|--:|--:|--:|--:|--:|--:|---|\n";
  o << "| " << r.cases << " | " << r.passed << " | " << r.failed << " | " << static_cast<int64_t>(r.seconds + 0.5) << " | "
    << static_cast<int64_t>(r.cases_per_second()) << " | " << r.seed << " | " << markdown_escape(r.profile) << " |\n\n";
  if (r.interrupted) o << "The run was interrupted.\n\n";
  for (const FailureRecord& f : r.failures) {
    o << "### " << (f.flaky ? "Flaky: " : "") << first_kind(f.verdict) << " in " << code(f.file.string()) << "\n\n";
    findings_list(o, f.verdict);
    o << "\nReport: " << code((report_dir_for(f.file) / "report.html").string()) << "\n\n" << fenced(f.replay_command + (f.locate_command.empty() ? std::string() : "\n" + f.locate_command)) << "\n";
  }
  o << summary_line(r.passed, r.failed) << "\n";
  return o.str();
}

std::string replay_summary_markdown(const ReplayResult& r) {
  std::ostringstream o;
  o << "## kvfuzz replay on " << code(r.target) << ": " << (r.failed() ? "❌ " + std::to_string(r.failed()) + " failed" : "✅ passed")
    << "\n\n";
  o << "| files | as expected | not as expected | seconds |\n|--:|--:|--:|--:|\n";
  o << "| " << r.items.size() << " | " << r.passed() << " | " << r.failed() << " | " << static_cast<int64_t>(r.seconds + 0.5) << " |\n\n";
  if (r.interrupted) o << "The replay was interrupted.\n\n";
  if (!r.skipped_files.empty()) {
    int64_t kernel = 0;
    for (const SkippedFile& f : r.skipped_files) kernel += is_kernel_skip(f.reason);
    const int64_t outside = static_cast<int64_t>(r.skipped_files.size()) - kernel;
    if (outside) o << outside << " case files outside the target's capabilities were skipped.\n\n";
    if (kernel) o << kernel << " case files were skipped by the kernel.\n\n";
  }
  for (const SkippedFile& f : r.not_cases)
    o << code(f.file.string()) << " is not a case file (" << markdown_escape(f.reason) << "), not replayed.\n\n";
  for (const ReplayItem& i : r.items) {
    if (i.as_expected) continue;
    o << "### " << code(i.file.string()) << " on " << code(i.target) << ": expected " << i.expected.text() << ", got "
      << (i.outcome.pass() ? std::string("pass") : "fail:" + i.outcome.first_kind()) << "\n\n";
    findings_list(o, i.outcome.verdict);
    o << "\n" << fenced(i.replay_command + "\n" + i.report_command + (i.locate_command.empty() ? std::string() : "\n" + i.locate_command)) << "\n";
  }
  o << summary_line(r.passed(), r.failed()) << "\n";
  return o.str();
}

}  // namespace kvf
