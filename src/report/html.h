// html.h — report.html: one self-contained page (inline CSS, JS and SVG; no network, no external
// assets) that lets a reader see in a minute which request was corrupted by which, where, and how
// to reproduce it.
//
// The page shows the verdict and the findings as sentences, the reproduction commands, a map of
// the cache as SVG (rows = physical blocks, columns = slots; colour = owning request, darker for the
// tokens this call appends; free blocks, block tails, stride gaps and the guard bands around the
// cache shaded; damaged cells marked, decoded on hover in a side panel and in each mark's <title>),
// a victim x writer matrix, the damaged slots as a table and the case. Caches with more than
// kMaxDetailedMapCells slots are drawn one square per block (the worst state of the block), followed
// by slot-level rows for the first kMaxDetailRows damaged blocks.
//
// The page's script sets <body data-rendered="ok"> once it has run, and records any script error in
// <html data-js-error>, so a headless browser can check that it rendered (tests/e2e/test_report_browser.py).
#pragma once

#include <cstdint>
#include <string>

#include "cell_map.h"

namespace kvf {

inline constexpr int64_t kMaxDetailedMapCells = 16384;  // slots drawn one by one, above: one square per block
inline constexpr int64_t kMaxDetailedMapBlocks = 512;   // rows drawn one by one at most
inline constexpr int64_t kMaxDetailRows = 24;           // damaged blocks drawn slot by slot under a per-block map
inline constexpr int64_t kMaxBlockSquares = 8192;       // squares of the per-block map; more blocks share a square
inline constexpr size_t kMaxDamageRows = 200;           // rows of the damaged-slot table

std::string render_report_html(const CaseReport& r);

// Escapes text for HTML character data and attribute values.
std::string html_escape(const std::string& text);

}  // namespace kvf
