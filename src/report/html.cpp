// html.cpp — see html.h.
#include "html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "case/placement.h"

namespace kvf {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

// Colour of request r: hues spread by the golden angle so neighbours differ.
double hue(int64_t r) { return std::fmod(210.0 + 137.508 * static_cast<double>(r), 360.0); }
std::string request_colour(int64_t r, SlotRole role) {
  const double h = hue(r);
  if (role == SlotRole::new_token) return "hsl(" + fmt(h) + ",70%,42%)";
  return "hsl(" + fmt(h) + ",62%,72%)";
}

std::string slot_fill(int64_t request, SlotRole role) {
  switch (role) {
    case SlotRole::free_block: return "#e5e7eb";
    case SlotRole::sink: return "#fde68a";
    case SlotRole::tail: return "url(#pat-tail)";
    case SlotRole::hole: return "url(#pat-hole)";
    case SlotRole::shared: return request_colour(request, SlotRole::context);  // the first owner's colour
    default: return request_colour(request, role);
  }
}

// "16..19", or a scattered request's positions in row order ("21, 17, 19"; the first 16).
std::string new_tokens_text(const Request& q) {
  if (q.new_len <= 0) return "–";
  if (consecutive_positions(q)) return num(q.context_len) + ".." + num(q.context_len + q.new_len - 1);
  std::string s;
  for (size_t i = 0; i < q.positions.size() && i < 16; ++i) s += (i ? ", " : "") + num(q.positions[i]);
  if (q.positions.size() > 16) s += ", …";
  return s;
}

char role_letter(SlotRole r) {
  switch (r) {
    case SlotRole::free_block: return 'f';
    case SlotRole::context: return 'c';
    case SlotRole::new_token: return 'n';
    case SlotRole::tail: return 't';
    case SlotRole::hole: return 'h';
    case SlotRole::shared: return 's';
    case SlotRole::sink: return 'k';
  }
  return 'f';
}

// Wrong or missing expected writes are the victim's own cells: a dot. Everything else (a writer
// hit a cell it does not own, a guard pattern appeared) is a cross.
bool own_write_problem(FindingKind k) { return k == FindingKind::wrong_value || k == FindingKind::missing_write; }

const char* kCss = R"CSS(
:root{--fg:#111827;--muted:#6b7280;--line:#e5e7eb;--bad:#dc2626;--ok:#15803d;--card:#fff;--bg:#f3f4f6}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{padding:18px 28px;color:#fff}
header.fail{background:#991b1b}header.pass{background:#166534}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;opacity:.92}
main{padding:16px 28px 40px;max-width:1500px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:0 0 16px}
h2{font-size:16px;margin:0 0 10px}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#0f172a;color:#e2e8f0;padding:10px 12px;border-radius:6px;overflow:auto;margin:0}
ol.findings{margin:0;padding-left:22px}
ol.findings li{margin:0 0 8px;cursor:pointer}
ol.findings li.focus{background:#fef2f2}
.kind{display:inline-block;font:600 11.5px/1.6 ui-monospace,"DejaVu Sans Mono",monospace;padding:0 6px;border-radius:4px;background:#fee2e2;color:#991b1b;margin-right:6px}
.cells{color:var(--muted);font-size:12px}
details{color:var(--muted);font-size:12.5px}
.muted{color:var(--muted)}
.map-wrap{display:flex;gap:14px;align-items:flex-start}
.map-scroll{overflow:auto;max-height:78vh;border:1px solid var(--line);border-radius:6px;flex:0 1 auto;background:#fff}
#cell-info{flex:0 0 360px;position:sticky;top:10px;white-space:pre-wrap;font:12px/1.5 ui-monospace,"DejaVu Sans Mono",monospace;background:#fff7ed;border:1px solid #fed7aa;border-radius:6px;padding:10px;min-height:120px}
#cell-info.pinned{border-color:var(--bad);box-shadow:0 0 0 2px #fecaca}
svg text{font:10px ui-monospace,"DejaVu Sans Mono",monospace;fill:#374151}
svg .corrupt rect{stroke:var(--bad);stroke-width:1.6}
svg .corrupt path{stroke:#7f1d1d;stroke-width:1.6;fill:none}
svg .corrupt circle{fill:#fff;stroke:#7f1d1d;stroke-width:1.6}
svg[data-focus] .corrupt{opacity:.18}
svg[data-focus] .corrupt.focus{opacity:1}
svg .blk:hover>rect.row-bg{stroke:#111827}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin-top:10px;font-size:12.5px}
.legend span.sw{display:inline-block;width:14px;height:14px;border:1px solid #9ca3af;vertical-align:-3px;margin-right:5px}
table{border-collapse:collapse;font-size:12.5px}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f9fafb}
td.n{text-align:right;font-variant-numeric:tabular-nums}
table.matrix td.n{min-width:56px}
.scroll{overflow:auto;max-height:60vh}
button{font:inherit;font-size:12px;padding:2px 10px;margin-top:6px;cursor:pointer}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:5px}
)CSS";

const char* kScript = R"JS(
(function () {
  var info = document.getElementById('cell-info');
  var pinned = false;
  var roleName = {f: 'free block', c: 'context token', n: 'new token (written by this call)', t: 'block tail (never written)',
                  h: 'hole (an unwritten position between new tokens; never written)',
                  s: 'context of a shared prefix block (never written)',
                  k: 'the sink slot 0 (padding rows may write it; never judged)'};
  function describe(ev) {
    var mark = ev.target.closest('[data-info]');
    if (mark) return mark.getAttribute('data-info');
    var row = ev.target.closest('g.blk');
    if (!row) return null;
    var svg = row.ownerSVGElement, pt = svg.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    var p = pt.matrixTransform(svg.getScreenCTM().inverse());
    var x0 = +row.dataset.x0, cw = +row.dataset.cw, roles = row.dataset.roles || '';
    var slot = Math.floor((p.x - x0) / cw);
    var head = 'block ' + row.dataset.block;
    if (slot < 0 || slot >= roles.length) return head + ': ' + row.dataset.summary;
    var r = roles.charAt(slot), req = +row.dataset.req, bs = roles.length;
    var text = head + ' slot ' + slot + ': ' + roleName[r];
    if (req >= 0) text += '\nowner: request ' + req + ', logical block ' + row.dataset.logical +
        ', token ' + (+row.dataset.logical * bs + slot);
    return text + '\nunchanged by the run';
  }
  document.querySelectorAll('svg.cache-map').forEach(function (svg) {
    svg.addEventListener('mousemove', function (ev) {
      if (pinned) return;
      var t = describe(ev);
      if (t) info.textContent = t;
    });
    svg.addEventListener('click', function (ev) {
      var t = describe(ev);
      pinned = !!t && !(pinned && info.textContent === t);
      if (t) info.textContent = t;
      info.classList.toggle('pinned', pinned);
    });
  });
  // Clicking a finding highlights the map cells of its kind.
  document.querySelectorAll('ol.findings li[data-kind]').forEach(function (li) {
    li.addEventListener('click', function () {
      var on = !li.classList.contains('focus');
      document.querySelectorAll('ol.findings li').forEach(function (x) { x.classList.remove('focus'); });
      document.querySelectorAll('svg.cache-map').forEach(function (svg) {
        if (on) svg.setAttribute('data-focus', li.dataset.kind); else svg.removeAttribute('data-focus');
        svg.querySelectorAll('.corrupt').forEach(function (c) {
          c.classList.toggle('focus', on && c.dataset.kind === li.dataset.kind);
        });
      });
      if (on) li.classList.add('focus');
    });
  });
  var copy = document.getElementById('copy-repro');
  if (copy) copy.addEventListener('click', function () {
    var text = document.getElementById('repro').textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text);
  });
  document.body.setAttribute('data-rendered', 'ok');
})();
)JS";

// SVG of the cache, slot by slot or block by block.
class MapWriter {
 public:
  explicit MapWriter(const CaseReport& r) : r_(r), m_(r.map) {
    const Case& c = r.kase;
    int64_t spans = 2 * m_.capacity() * c.num_heads * c.head_dim;
    has_gaps_ = c.cache_buffer_elems > spans;
    has_holes_ = std::find(m_.roles.begin(), m_.roles.end(), SlotRole::hole) != m_.roles.end();
    for (size_t i = 0; i < m_.damage.size(); ++i) {
      const int64_t b = m_.damage[i].block;
      auto [it, fresh] = by_block_.try_emplace(b, std::make_pair(i, i + 1));
      if (!fresh) it->second.second = i + 1;
    }
  }

  bool detailed() const { return m_.capacity() <= kMaxDetailedMapCells && m_.num_blocks <= kMaxDetailedMapBlocks; }

  // The whole map section body.
  std::string render() {
    std::ostringstream o;
    if (m_.num_blocks <= 0 || m_.block_size <= 0) return "<p class=\"muted\">The case has no cache blocks.</p>";
    if (detailed()) {
      std::vector<int64_t> blocks(static_cast<size_t>(m_.num_blocks));
      for (int64_t b = 0; b < m_.num_blocks; ++b) blocks[static_cast<size_t>(b)] = b;
      o << "<p class=\"muted\">The cache has " << m_.num_blocks << (m_.num_blocks == 1 ? " physical block" : " physical blocks")
        << "; each row of cells is one block's " << m_.block_size
        << (m_.block_size == 1 ? " slot" : " slots") << " (all heads and dims of K and V together). Hover a cell for what it holds; click to pin.</p>\n";
      o << "<div class=\"map-wrap\"><div class=\"map-scroll\">" << rows_svg(blocks, true, "cache-map-slots") << "</div>"
        << info_panel() << "</div>\n";
    } else {
      o << "<p class=\"muted\">The cache has " << m_.num_blocks << " blocks of " << m_.block_size
        << (m_.block_size == 1 ? " slot" : " slots") << ": each square is " << (group() == 1 ? std::string("one physical block") : num(group()) + " consecutive blocks")
        << ", coloured by owner and outlined red if any of its cells differ. Damaged blocks follow slot by slot.</p>\n";
      o << "<div class=\"map-wrap\"><div class=\"map-scroll\">" << blocks_svg() << "</div>" << info_panel() << "</div>\n";
      std::vector<int64_t> damaged;
      for (int64_t b = 0; b < m_.num_blocks; ++b)
        if (m_.block_cells[static_cast<size_t>(b)] > 0) damaged.push_back(b);
      const auto total = static_cast<int64_t>(damaged.size());
      if (total > kMaxDetailRows) damaged.resize(static_cast<size_t>(kMaxDetailRows));
      if (!damaged.empty()) {
        o << "<h3 style=\"font-size:14px;margin:14px 0 6px\">Damaged blocks, slot by slot"
          << (total > kMaxDetailRows ? " (first " + num(kMaxDetailRows) + " of " + num(total) + ")" : std::string()) << "</h3>\n";
        o << "<div class=\"map-scroll\">" << rows_svg(damaged, false, "cache-map-damaged") << "</div>\n";
      }
    }
    o << legend();
    return o.str();
  }

 private:
  std::string info_panel() const {
    // Start with the damaged guard bands and the most severe damaged slot, so the page says
    // something before any hover.
    const SlotDamage* worst = nullptr;
    for (const SlotDamage& s : m_.damage)
      if (worst == nullptr || severity(s.worst) < severity(worst->worst)) worst = &s;
    std::string guards;
    if (m_.guard_before) guards += "guard band before the cache: " + num(m_.guard_before) + " bytes overwritten (oob_write)\n";
    if (m_.guard_after) guards += "guard band after the cache: " + num(m_.guard_after) + " bytes overwritten (oob_write)\n";
    if (!guards.empty() && worst) guards += "\n";
    std::string text = guards + (worst ? describe_damage(*worst) : std::string());
    if (text.empty())
      text = r_.verdict.pass() ? "No cache cell differs. Hover a cell to see what it holds."
                               : "No cache cell differs (the findings are outside the cache). Hover a cell to see what it holds.";
    return "<aside id=\"cell-info\" aria-live=\"polite\">" + html_escape(text) + "</aside>";
  }

  int64_t group() const { return (m_.num_blocks + kMaxBlockSquares - 1) / kMaxBlockSquares; }

  // Mark of one damaged slot at (x, y, w, h).
  std::string mark(const SlotDamage& s, double x, double y, double w, double h) const {
    const std::string text = describe_damage(s);
    std::ostringstream o;
    o << "<g class=\"corrupt\" data-kind=\"" << to_string(s.worst) << "\" data-block=\"" << s.block << "\" data-slot=\"" << s.pos
      << "\" data-victim=\"" << html_escape(s.first.victim) << "\" data-writer=\"" << html_escape(s.first.writer)
      << "\" data-info=\"" << html_escape(text) << "\"><title>" << html_escape(text) << "</title>";
    o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(w) << "\" height=\"" << fmt(h) << "\" fill=\"none\"/>";
    if (own_write_problem(s.worst)) {
      o << "<circle cx=\"" << fmt(x + w / 2) << "\" cy=\"" << fmt(y + h / 2) << "\" r=\"" << fmt(std::max(1.2, std::min(w, h) / 4)) << "\"/>";
    } else {
      const double p = std::min(w, h) > 6 ? 2 : 0.5;
      o << "<path d=\"M" << fmt(x + p) << " " << fmt(y + p) << "L" << fmt(x + w - p) << " " << fmt(y + h - p) << "M" << fmt(x + w - p)
        << " " << fmt(y + p) << "L" << fmt(x + p) << " " << fmt(y + h - p) << "\"/>";
    }
    o << "</g>";
    return o.str();
  }

  std::string defs() const {
    return "<defs>"
           "<pattern id=\"pat-tail\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
           "<rect width=\"6\" height=\"6\" fill=\"#f8fafc\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#cbd5e1\" stroke-width=\"2\"/></pattern>"
           "<pattern id=\"pat-hole\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
           "<rect width=\"6\" height=\"6\" fill=\"#fffbeb\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#f59e0b\" stroke-width=\"2\"/></pattern>"
           "<pattern id=\"pat-gap\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
           "<rect width=\"5\" height=\"5\" fill=\"#e2e8f0\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#94a3b8\" stroke-width=\"2\"/></pattern>"
           "<pattern id=\"pat-guard\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
           "<rect width=\"8\" height=\"8\" fill=\"#475569\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#1e293b\" stroke-width=\"4\"/></pattern>"
           "</defs>";
  }

  // A guard band strip.
  std::string guard(const char* where, int64_t bytes, double x, double y, double w, double h) const {
    const std::string text = std::string("guard band ") + where + " the cache: " +
                             (bytes ? num(bytes) + " bytes overwritten (oob_write)" : std::string("intact"));
    std::ostringstream o;
    o << "<g class=\"guard" << (bytes ? " corrupt" : "") << "\" data-kind=\"oob_write\" data-info=\"" << html_escape(text) << "\"><title>"
      << html_escape(text) << "</title><rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(w) << "\" height=\"" << fmt(h)
      << "\" fill=\"url(#pat-guard)\"" << (bytes ? "" : " stroke=\"none\"") << "/>";
    o << "<text x=\"" << fmt(x + 6) << "\" y=\"" << fmt(y + h - 3) << "\" style=\"fill:#fff;font-weight:600\">" << html_escape(text)
      << "</text></g>";
    return o.str();
  }

  // One tile per listed block (its slots, a stride-gap cell, its owner), as many tiles per line as
  // fit in about 860 px; guard bands above and below when `guards` (the whole cache is drawn).
  std::string rows_svg(const std::vector<int64_t>& blocks, bool guards, const char* id) const {
    const int64_t bs = m_.block_size;
    const double cw = std::clamp(std::floor(960.0 / static_cast<double>(bs)), 4.0, 22.0);
    const double rh = std::clamp(cw, 9.0, 20.0);
    const double pitch = rh + 3;
    const double label_w = 64;                                  // "block 1234"
    const double cells_w = static_cast<double>(bs) * cw;
    const double gap_w = has_gaps_ ? std::max(cw, 9.0) : 0;
    const double owner_w = m_.shared_blocks.empty() ? 70 : 110;  // swatch + "r12 L345" (or "shared r0, 2 and 5")
    const double tile_w = label_w + cells_w + (has_gaps_ ? gap_w + 4 : 0) + 6 + owner_w + 14;
    const auto per_line = static_cast<int64_t>(std::clamp(std::floor(860.0 / tile_w), 1.0, 16.0));
    const auto lines = static_cast<int64_t>((blocks.size() + static_cast<size_t>(per_line) - 1) / static_cast<size_t>(per_line));
    const double width = std::max(std::min<double>(static_cast<double>(per_line), static_cast<double>(blocks.size())) * tile_w + 8, 420.0);
    const double guard_h = 16;
    const double header = 16;
    const double rows_top = header + (guards ? guard_h + 6 : 2);
    const double height = rows_top + pitch * static_cast<double>(lines) + (guards ? guard_h + 8 : 2);

    std::ostringstream o;
    o << "<svg class=\"cache-map\" id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\""
      << fmt(height) << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" role=\"img\" aria-label=\"cache map\">" << defs();
    // Slot numbers over each column of tiles.
    const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(28.0 / cw)));
    for (int64_t t = 0; t < std::min<int64_t>(per_line, static_cast<int64_t>(blocks.size())); ++t) {
      const double tx = 4 + static_cast<double>(t) * tile_w;
      o << "<text x=\"" << fmt(tx) << "\" y=\"11\" class=\"muted\">slot</text>";
      for (int64_t p = 0; p < bs; p += every) o << "<text x=\"" << fmt(tx + label_w + static_cast<double>(p) * cw + 1) << "\" y=\"11\">" << p << "</text>";
      if (has_gaps_) o << "<text x=\"" << fmt(tx + label_w + cells_w + 4) << "\" y=\"11\">gap</text>";
    }
    if (guards) o << guard("before", m_.guard_before, 4, header, width - 8, guard_h);

    for (size_t i = 0; i < blocks.size(); ++i) {
      const int64_t b = blocks[i];
      const double tx = 4 + static_cast<double>(static_cast<int64_t>(i) % per_line) * tile_w;
      const double y = rows_top + static_cast<double>(static_cast<int64_t>(i) / per_line) * pitch;
      const double x0 = tx + label_w;
      const double gap_x = x0 + cells_w + 4;
      const double owner_x = x0 + cells_w + (has_gaps_ ? gap_w + 4 : 0) + 6;
      const int64_t req = m_.block_request[static_cast<size_t>(b)];
      const int64_t logical = m_.block_logical[static_cast<size_t>(b)];
      std::string roles(static_cast<size_t>(bs), 'f');
      for (int64_t p = 0; p < bs; ++p) roles[static_cast<size_t>(p)] = role_letter(m_.role(b, p));
      const auto shared = m_.shared_blocks.find(b);
      std::string owners;  // a shared block's owners: "0, 2 and 5"
      if (shared != m_.shared_blocks.end())
        for (size_t k = 0; k < shared->second.size(); ++k)
          owners += (k == 0 ? "" : k + 1 == shared->second.size() ? " and " : ", ") + num(shared->second[k]);
      const std::string owner = shared != m_.shared_blocks.end() ? "prefix block shared by requests " + owners
                                : req >= 0 ? "request " + num(req) + ", logical block " + num(logical) : std::string("free block");
      const int64_t hit = m_.block_cells[static_cast<size_t>(b)];
      o << "<g class=\"blk\" data-block=\"" << b << "\" data-req=\"" << req << "\" data-logical=\"" << logical << "\" data-x0=\"" << fmt(x0)
        << "\" data-cw=\"" << fmt(cw) << "\" data-roles=\"" << roles << "\" data-summary=\"" << html_escape(owner)
        << (hit ? ", " + num(hit) + " differing cells" : std::string()) << "\">";
      o << "<text x=\"" << fmt(tx) << "\" y=\"" << fmt(y + rh - 3) << "\"" << (hit ? " style=\"fill:#991b1b;font-weight:700\"" : "") << ">block " << m_.block_name(b)
        << "</text>";
      // Runs of equal role as one rect each, then slot separators.
      for (int64_t p = 0; p < bs;) {
        int64_t q = p;
        while (q < bs && roles[static_cast<size_t>(q)] == roles[static_cast<size_t>(p)]) ++q;
        o << "<rect x=\"" << fmt(x0 + static_cast<double>(p) * cw) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(static_cast<double>(q - p) * cw)
          << "\" height=\"" << fmt(rh) << "\" fill=\"" << slot_fill(req, m_.role(b, p)) << "\"/>";
        p = q;
      }
      if (cw >= 6 && bs > 1) {
        o << "<path d=\"";
        for (int64_t p = 1; p < bs; ++p) o << "M" << fmt(x0 + static_cast<double>(p) * cw) << " " << fmt(y) << "v" << fmt(rh);
        o << "\" stroke=\"#fff\" stroke-width=\"1\"/>";
      }
      o << "<rect class=\"row-bg\" x=\"" << fmt(x0) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(cells_w) << "\" height=\"" << fmt(rh)
        << "\" fill=\"none\"/>";
      if (has_gaps_)
        o << "<rect x=\"" << fmt(gap_x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(gap_w) << "\" height=\"" << fmt(rh) << "\" fill=\"url(#pat-gap)\"/>";
      if (req >= 0)
        o << "<rect x=\"" << fmt(owner_x) << "\" y=\"" << fmt(y + 1) << "\" width=\"8\" height=\"" << fmt(rh - 2) << "\" fill=\""
          << request_colour(req, SlotRole::context) << "\"/>";
      o << "<text x=\"" << fmt(owner_x + 11) << "\" y=\"" << fmt(y + rh - 3) << "\">"
        << (shared != m_.shared_blocks.end() ? "shared r" + owners : req >= 0 ? "r" + num(req) + " L" + num(logical) : std::string("free"))
        << "</text>";
      o << "</g>";
      // Damage marks of this block.
      const auto found = by_block_.find(b);
      if (found != by_block_.end()) {
        for (size_t k = found->second.first; k < found->second.second; ++k) {
          const SlotDamage& s = m_.damage[k];
          if (s.pos < 0) {
            o << mark(s, has_gaps_ ? gap_x : x0 + cells_w + 1, y, has_gaps_ ? gap_w : 4, rh);
          } else {
            o << mark(s, x0 + static_cast<double>(s.pos) * cw, y, cw, rh);
          }
        }
      }
    }
    if (guards) {
      const double gy = rows_top + pitch * static_cast<double>(lines) + 4;
      o << guard("after", m_.guard_after, 4, gy, width - 8, guard_h);
      // Stride-gap cells outside every block's span sit at the end of the band after the cache.
      const auto outside = by_block_.find(-1);
      if (outside != by_block_.end())
        for (size_t k = outside->second.first; k < outside->second.second; ++k) o << mark(m_.damage[k], width - 26, gy, 18, guard_h);
    }
    o << "</svg>";
    return o.str();
  }

  // One square per block (or per `group()` consecutive blocks).
  std::string blocks_svg() const {
    const int64_t g = group();
    const int64_t squares = (m_.num_blocks + g - 1) / g;
    const int64_t cols = std::min<int64_t>(64, squares);
    const int64_t rows = (squares + cols - 1) / cols;
    const double sq = 13, pitch = 15, x0 = 60, guard_h = 16;
    const double width = x0 + static_cast<double>(cols) * pitch + 10;
    const double top = 18 + guard_h + 6;
    const double height = top + static_cast<double>(rows) * pitch + guard_h + 14;
    std::ostringstream o;
    o << "<svg class=\"cache-map\" id=\"cache-map-blocks\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\""
      << fmt(height) << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" role=\"img\" aria-label=\"cache map by block\">"
      << defs();
    for (int64_t c = 0; c < cols; c += 8)
      o << "<text x=\"" << fmt(x0 + static_cast<double>(c) * pitch) << "\" y=\"12\">+" << c * g << "</text>";
    o << guard("before", m_.guard_before, 4, 18, width - 8, guard_h);
    for (int64_t i = 0; i < squares; ++i) {
      const int64_t first = i * g, last = std::min(m_.num_blocks, first + g) - 1;
      const double x = x0 + static_cast<double>(i % cols) * pitch, y = top + static_cast<double>(i / cols) * pitch;
      if (i % cols == 0) o << "<text x=\"4\" y=\"" << fmt(y + 10) << "\">" << first << "</text>";
      // Owner of the first owned block in the square; damaged cells summed.
      int64_t req = -1, hit = 0, owned = 0;
      bool has_new = false;
      for (int64_t b = first; b <= last; ++b) {
        const int64_t r = m_.block_request[static_cast<size_t>(b)];
        if (r >= 0) {
          ++owned;
          if (req < 0) req = r;
          for (int64_t p = 0; p < m_.block_size && !has_new; ++p) has_new = m_.role(b, p) == SlotRole::new_token;
        }
        hit += m_.block_cells[static_cast<size_t>(b)];
      }
      const std::string fill = req < 0 ? "#e5e7eb" : request_colour(req, has_new ? SlotRole::new_token : SlotRole::context);
      std::string label = first == last ? "block " + num(first) : "blocks " + num(first) + ".." + num(last);
      label += req < 0 ? ": free" : first == last ? ": request " + num(req) + ", logical " + num(m_.block_logical[static_cast<size_t>(first)])
                                                 : ": " + num(owned) + " owned (first by request " + num(req) + ")";
      if (hit) {
        // The worst damaged slot in the square decodes it.
        const SlotDamage* worst = nullptr;
        for (int64_t b = first; b <= last; ++b) {
          const auto f = by_block_.find(b);
          if (f == by_block_.end()) continue;
          for (size_t k = f->second.first; k < f->second.second; ++k)
            if (worst == nullptr || severity(m_.damage[k].worst) < severity(worst->worst)) worst = &m_.damage[k];
        }
        std::string text = label + "\n" + num(hit) + " differing cells";
        SlotDamage s;
        if (worst != nullptr) {
          s = *worst;
          text += "; worst slot:\n" + describe_damage(*worst);
        }
        o << "<g class=\"corrupt\" data-kind=\"" << (worst ? std::string(to_string(worst->worst)) : std::string()) << "\" data-block=\""
          << first << "\" data-victim=\"" << html_escape(worst ? worst->first.victim : std::string()) << "\" data-writer=\""
          << html_escape(worst ? worst->first.writer : std::string()) << "\" data-info=\"" << html_escape(text) << "\"><title>"
          << html_escape(text) << "</title><rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(sq) << "\" height=\""
          << fmt(sq) << "\" fill=\"" << fill << "\"/><path d=\"M" << fmt(x + 2) << " " << fmt(y + 2) << "L" << fmt(x + sq - 2) << " "
          << fmt(y + sq - 2) << "M" << fmt(x + sq - 2) << " " << fmt(y + 2) << "L" << fmt(x + 2) << " " << fmt(y + sq - 2) << "\"/></g>";
      } else {
        o << "<rect data-info=\"" << html_escape(label) << "\" x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(sq)
          << "\" height=\"" << fmt(sq) << "\" fill=\"" << fill << "\"/>";
      }
    }
    o << guard("after", m_.guard_after, 4, top + static_cast<double>(rows) * pitch + 6, width - 8, guard_h);
    o << "</svg>";
    return o.str();
  }

  std::string legend() const {
    std::ostringstream o;
    o << "<div class=\"legend\">";
    const int64_t shown = std::min<int64_t>(static_cast<int64_t>(r_.kase.requests.size()), 16);
    for (int64_t q = 0; q < shown; ++q)
      o << "<span><span class=\"sw\" style=\"background:" << request_colour(q, SlotRole::context) << "\"></span><span class=\"sw\" style=\"background:"
        << request_colour(q, SlotRole::new_token) << "\"></span>request " << q << " (context, new)</span>";
    if (static_cast<int64_t>(r_.kase.requests.size()) > shown) o << "<span>… " << r_.kase.requests.size() - shown << " more requests</span>";
    auto sw = [&](const std::string& svg_fill, const char* text) {
      o << "<span><svg width=\"14\" height=\"14\" style=\"vertical-align:-3px;margin-right:5px\"><rect width=\"14\" height=\"14\" fill=\""
        << svg_fill << "\" stroke=\"#9ca3af\"/></svg>" << text << "</span>";
    };
    sw("#e5e7eb", "free block");
    if (r_.kase.padding == PaddingMode::sink) sw("#fde68a", "sink slot 0 (padding rows may write it; never judged)");
    sw("url(#pat-tail)", "block tail (never written)");
    if (has_holes_) sw("url(#pat-hole)", "hole (unwritten position between new tokens)");
    if (!m_.shared_blocks.empty()) o << "<span>shared prefix block: the first owner's colour, owners listed right of the block</span>";
    if (has_gaps_) sw("url(#pat-gap)", "stride gaps");
    sw("url(#pat-guard)", "guard band");
    o << "<span><svg width=\"14\" height=\"14\" style=\"vertical-align:-3px;margin-right:5px\"><rect x=\"1\" y=\"1\" width=\"12\" height=\"12\" "
         "fill=\"#fff\" stroke=\"#dc2626\" stroke-width=\"1.6\"/><path d=\"M3 3L11 11M11 3L3 11\" stroke=\"#7f1d1d\" stroke-width=\"1.6\"/></svg>"
         "hit by a writer that does not own it</span>";
    o << "<span><svg width=\"14\" height=\"14\" style=\"vertical-align:-3px;margin-right:5px\"><rect x=\"1\" y=\"1\" width=\"12\" height=\"12\" "
         "fill=\"#fff\" stroke=\"#dc2626\" stroke-width=\"1.6\"/><circle cx=\"7\" cy=\"7\" r=\"3\" fill=\"#fff\" stroke=\"#7f1d1d\" stroke-width=\"1.6\"/></svg>"
         "expected write wrong or missing</span>";
    o << "</div>";
    return o.str();
  }

  const CaseReport& r_;
  const CellMap& m_;
  bool has_gaps_ = false;
  bool has_holes_ = false;  // some slot is a hole (scattered positions)
  std::map<int64_t, std::pair<size_t, size_t>> by_block_;  // block -> [begin, end) in m_.damage
};

std::string matrix_html(const CellMap& m) {
  if (m.matrix.empty()) return "<p class=\"muted\">Nothing differs.</p>";
  int64_t top = 1;
  for (const MatrixRow& r : m.matrix)
    for (int64_t n : r.cells) top = std::max(top, n);
  std::ostringstream o;
  o << "<p class=\"muted\">Differing elements by whose cells were hit (rows) and whose value landed there (columns). "
       "A request's own row and column meeting means it damaged its own cells.</p>";
  o << "<div class=\"scroll\"><table class=\"matrix\" id=\"victim-writer\"><tr><th>victim \\ writer</th>";
  for (const std::string& w : m.writers) o << "<th>" << html_escape(w) << "</th>";
  o << "</tr>";
  for (const MatrixRow& r : m.matrix) {
    o << "<tr><th>" << html_escape(r.victim) << "</th>";
    for (int64_t n : r.cells) {
      if (n == 0) {
        o << "<td class=\"n\"></td>";
        continue;
      }
      const double a = 0.12 + 0.6 * std::log1p(static_cast<double>(n)) / std::log1p(static_cast<double>(top));
      char alpha[16];
      std::snprintf(alpha, sizeof alpha, "%.2f", a);
      o << "<td class=\"n\" style=\"background:rgba(220,38,38," << alpha << ")\">" << n
        << "</td>";
    }
    o << "</tr>";
  }
  o << "</table></div>";
  return o.str();
}

std::string damage_table(const CellMap& m) {
  if (m.damage.empty()) return "";
  std::ostringstream o;
  o << "<section id=\"damage\"><h2>Damaged cache slots (" << m.damage.size() << ")</h2><div class=\"scroll\"><table><tr><th>block</th><th>slot</th>"
       "<th>kind</th><th>victim</th><th>written by</th><th>cells</th><th>first cell</th><th>expected</th><th>found</th></tr>";
  for (size_t i = 0; i < m.damage.size() && i < kMaxDamageRows; ++i) {
    const SlotDamage& s = m.damage[i];
    std::string writers;
    for (size_t k = 0; k < s.writers.size(); ++k) writers += (k ? ", " : "") + s.writers[k];
    if (s.more_writers) writers += ", …";
    o << "<tr><td class=\"n\">" << (s.block >= 0 ? m.block_name(s.block) : "–") << "</td><td class=\"n\">" << (s.pos >= 0 ? num(s.pos) : "gap")
      << "</td><td><span class=\"kind\">" << to_string(s.worst) << "</span></td><td>" << html_escape(s.first.victim) << "</td><td>"
      << html_escape(writers) << "</td><td class=\"n\">" << s.cells << "</td><td class=\"mono\">" << html_escape(describe_cell(s.first))
      << "</td><td><code>" << hex_bits(s.first.expected, s.first.bytes) << "</code> " << html_escape(s.first.expected_meaning)
      << "</td><td><code>" << hex_bits(s.first.found, s.first.bytes) << "</code> " << html_escape(s.first.found_meaning) << "</td></tr>";
  }
  o << "</table></div>";
  if (m.damage.size() > kMaxDamageRows)
    o << "<p class=\"muted\">… and " << m.damage.size() - kMaxDamageRows << " more (report.json lists them).</p>";
  o << "</section>\n";
  return o.str();
}

std::string case_html(const CaseReport& r) {
  const Case& c = r.kase;
  std::ostringstream o;
  o << "<section id=\"case\"><h2>Case</h2><table><tr><th>file</th><td class=\"mono\">" << html_escape(r.case_file.string())
    << "</td></tr><tr><th>target</th><td>" << html_escape(r.target) << "</td></tr><tr><th>layout</th><td>" << to_string(c.layout)
    << "</td></tr><tr><th>dtypes</th><td>input " << to_string(c.input_dtype) << ", cache " << to_string(c.cache_dtype) << ", slots "
    << to_string(c.slot_dtype) << "</td></tr><tr><th>heads × head_dim</th><td>" << c.num_heads << " × " << c.head_dim
    << (c.num_q_heads > 0 ? " (fused QKV input, " + num(c.num_q_heads) + " Q heads)" : std::string()) << "</td></tr><tr><th>blocks × block_size</th><td>"
    << c.cache.num_blocks << " × " << c.cache.block_size
    << (c.has_cp() ? " (" + num(c.num_ranks()) + " shards of " + num(c.shard_blocks()) + ")" : std::string())
    << (serving_text(c).empty() ? std::string() : "</td></tr><tr><th>serving</th><td>" + html_escape(serving_text(c)))
    << "</td></tr><tr><th>strides (block, pos, head)</th><td>" << c.cache.stride_block
    << ", " << c.cache.stride_pos << ", " << c.cache.stride_head << " (K at element " << c.cache_k_offset << ", V at " << c.cache_v_offset
    << " of " << c.cache_buffer_elems << ")</td></tr><tr><th>input rows</th><td>" << c.num_input_rows << " (" << c.num_slots()
    << " with a slot)</td></tr><tr><th>payload</th><td>" << to_string(c.dist) << "</td></tr><tr><th>expect</th><td>"
    << html_escape(c.expect.text()) << "</td></tr>";
  if (!c.provenance.seed.empty())
    o << "<tr><th>found by</th><td>seed " << html_escape(c.provenance.seed) << ", case " << c.provenance.case_index << "</td></tr>";
  o << "</table>";
  o << "<h3 style=\"font-size:14px;margin:12px 0 6px\">Requests</h3><table id=\"requests\"><tr><th>request</th><th>context_len</th><th>new_len</th>"
       "<th>new tokens</th><th>blocks (logical order)</th></tr>";
  for (size_t i = 0; i < c.requests.size(); ++i) {
    const Request& q = c.requests[i];
    o << "<tr><td><span class=\"swatch\" style=\"background:" << request_colour(static_cast<int64_t>(i), SlotRole::context) << "\"></span>" << i
      << "</td><td class=\"n\">" << q.context_len << "</td><td class=\"n\">" << q.new_len << "</td><td class=\"n\">"
      << new_tokens_text(q) << "</td><td class=\"mono\">";
    for (size_t b = 0; b < q.blocks.size() && b < 64; ++b) o << (b ? ", " : "") << q.blocks[b];
    if (q.blocks.size() > 64) o << ", … (" << q.blocks.size() << " blocks)";
    o << "</td></tr>";
  }
  o << "</table>";
  o << "<h3 style=\"font-size:14px;margin:12px 0 6px\">slot_mapping</h3><p class=\"mono\">";
  const int64_t shown = std::min<int64_t>(c.num_slots(), 256);
  for (int64_t i = 0; i < shown; ++i) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(i)];
    const bool odd = s < 0 || s >= c.capacity();
    o << (i ? " " : "") << "<span title=\"row " << i << "\"" << (odd ? " style=\"color:#b45309\"" : "") << ">" << s << "</span>";
  }
  if (c.num_slots() > shown) o << " … (" << c.num_slots() << " entries)";
  if (c.num_slots() == 0) o << "(empty)";
  o << "</p><p class=\"muted\">Negative slots are padding (skipped); slots ≥ capacity " << c.capacity()
    << " are invalid (never written, counted); rows ≥ " << c.num_slots() << " are CUDA-graph padding.</p></section>\n";
  return o.str();
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string s;
  s.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&quot;"; break;
      case '\'': s += "&#39;"; break;
      case '\n': s += "&#10;"; break;
      default: s += ch;
    }
  }
  return s;
}

std::string render_report_html(const CaseReport& r) {
  const bool pass = r.verdict.pass();
  const std::string kind = pass ? "" : std::string(to_string(r.verdict.findings.front().kind));
  const std::string title = pass ? "PASS" : "FAIL · " + kind;
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
    << "<title>kvfuzz report: " << html_escape(title) << " — " << html_escape(r.case_file.filename().string()) << "</title>\n"
    << "<script>window.addEventListener('error',function(e){document.documentElement.setAttribute('data-js-error',String(e.message));});</script>\n"
    << "<style>" << kCss << "</style></head>\n<body data-rendered=\"no\">\n";
  o << "<header class=\"" << (pass ? "pass" : "fail") << "\"><h1>kvfuzz: " << html_escape(title) << "</h1><p>"
    << html_escape(r.case_file.string()) << " on " << html_escape(r.target) << " · " << html_escape(case_shape_line(r.kase)) << "</p></header>\n<main>\n";

  o << "<section id=\"findings\"><h2>What happened</h2>";
  if (!r.ran) o << "<p><strong>The run did not finish.</strong> The map shows the memory image as the kernel left it.</p>";
  if (pass) {
    o << "<p>Every byte of the arena matches the golden model.</p>";
  } else {
    o << "<ol class=\"findings\">";
    for (const Finding& f : r.verdict.findings) {
      o << "<li class=\"finding\" data-kind=\"" << to_string(f.kind) << "\"><span class=\"kind\">" << to_string(f.kind) << "</span>"
        << html_escape(f.sentence);
      // The amount, unless the sentence says it already ("(K, 16 cells)", "wrote 2 bytes").
      if (const std::string a = finding_amount(f); !a.empty() && f.sentence.find(a) == std::string::npos) o << " <span class=\"cells\">(" << a << ")</span>";
      if (!f.example.empty()) o << "<details><summary>first cell</summary>" << html_escape(f.example) << "</details>";
      o << "</li>";
    }
    o << "</ol><p class=\"muted\">" << html_escape(differing_total(r.verdict)) << " in all; click a finding to highlight its cells.</p>";
  }
  o << "</section>\n";

  o << "<section id=\"reproduce\"><h2>Reproduce</h2><pre id=\"repro\">" << html_escape(r.replay_command) << "\n"
    << html_escape(r.report_command) << "</pre><button id=\"copy-repro\" type=\"button\">copy</button>";
  if (!r.locate_command.empty())
    o << "<p>Where it crashed: this runs the case in one process under a tool that prints the place</p><pre id=\"locate\">"
      << html_escape(r.locate_command) << "</pre>";
  o << "</section>\n";

  MapWriter map(r);
  o << "<section id=\"map\"><h2>Cache map</h2>" << map.render() << "</section>\n";
  o << "<section id=\"matrix\"><h2>Victim × writer</h2>" << matrix_html(r.map) << "</section>\n";
  o << damage_table(r.map);
  o << case_html(r);
  o << "</main>\n<footer style=\"padding:0 28px 20px\" class=\"muted\">kvfuzz " << KVFUZZ_VERSION << "</footer>\n";
  o << "<script>" << kScript << "</script>\n</body></html>\n";
  return o.str();
}

}  // namespace kvf
