// suggest.h — "did you mean ...?": the nearest of some names to a word that is none of them.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace kvf {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The name nearest to `word` within `max_edits` edits (and fewer edits than the name has
// characters), the first of equally near ones; empty when none is that near.
inline std::string nearest_name(const std::string& word, const std::vector<std::string>& names, size_t max_edits = 2) {
  std::string best;
  size_t best_d = max_edits + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_d && d < n.size()) {
      best_d = d;
      best = n;
    }
  }
  return best;
}

}  // namespace kvf
