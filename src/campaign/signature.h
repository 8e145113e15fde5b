// signature.h — when two failures are the same bug: a versioned finding signature, and the index of
// signatures a findings folder keeps across runs (docs/findings.md).
//
// A signature describes the bug, not the case that showed it ("one bug, one finding"):
//
//   bug class   = kind | victim class | writer class        of the first (most severe) finding, coarsened:
//     victim    stray_write: context, tail, hole, gap -> own_cells (the writing request's own cells;
//               which of them a bug hits follows from the layout), free_block kept;
//               cross_request_write: context, shared_block -> other_request;
//               padding_leak, oob_read_suspected: every cache cell -> cache;
//               others as the finding names them (new_token, guard_band, key_view, ...), with the
//               scale_cache: prefix kept;
//     writer    padding_row, invalid_row, graph_row, unwritten_rows, input_gap, guard_pattern kept;
//               request, unknown, ambiguous, kernel -> kernel (what the value decoder can tell
//               depends on the dtypes, not on the bug);
//     launch_error, crash, timeout: "KIND|run|kernel" (no message text).
//   signature v2 = "v2 " + bug class; its id: 16 hex digits of its FNV-1a hash. Layout, dtypes,
//   shape buckets, serving conventions and message text are not part of it (the saved case shows
//   them; `features` lists them for the reader).
//   identity    = bug class (+ | the refusal or death message with every number as '#', for
//                 launch_error, crash, timeout): what the shrinker keeps (a launch refused at 64
//                 heads does not shrink into an empty batch refused).
//
// Version 1 signatures ("v1 " + identity + " " + features, with the fine classes) are never
// produced now; an index holding them is still read, its v1 entries simply match no new failure.
// A campaign shrinks a failure only when the signature of the failing case is new to it, and saves a
// minimal case only when its signature is new to the folder's index or smaller than the case the
// index holds.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arena/finding.h"
#include "case/case.h"

namespace kvf {

struct Signature {
  static constexpr int kVersion = 2;
  std::string bug;       // the bug class: what the signature is
  std::string identity;  // what the shrinker keeps: the bug class (+ message of a run failure)
  std::string features;  // the case's discrete features (layout, dtypes, buckets): not in the text
  std::string text() const;  // "v2 <bug class>"
  std::string id() const;    // 16 hex digits
};

// The bug class of a failing verdict ("" for a passing one).
std::string bug_class_of(const Verdict& v);
// The identity of a failing verdict ("" for a passing one).
std::string identity_of(const Verdict& v);

// The signature of failing verdict `v` of case `c`.
Signature signature_of(const Case& c, const Verdict& v);

// A case's size, compared lexicographically: slots, requests, heads, head_dim, bytes of its arena.
using CaseSize = std::array<int64_t, 5>;
CaseSize size_of(const Case& c);

// The folder's index: FOLDER/signatures.kvfuzz-index (JSON; not *.json, so `replay FOLDER` does not
// read it), rewritten atomically under an flock on FOLDER/signatures.kvfuzz-index.lock, so concurrent
// campaigns into one folder keep one index. Thread-safe.
class FindingsIndex {
 public:
  struct Entry {
    std::string signature;                // Signature::text()
    std::string file;                     // the smallest case of it, relative to the folder
    CaseSize size{};
    int64_t found = 0;                    // failures of this signature seen by every run
    std::vector<std::string> superseded;  // earlier, larger cases of it (kept; `merge --prune` deletes)
  };

  // Reads FOLDER's index if there is one (a bad one: InputError naming it).
  explicit FindingsIndex(std::filesystem::path folder);

  // The entry of signature `id`, re-read from disk (another process may have added it).
  std::optional<Entry> find(const std::string& id);
  // Counts one more failure of `id`.
  void count(const std::string& id);
  // Records `file` (saved in the folder) as the case of `s` if the signature is new or `size` is
  // smaller than the recorded one; returns whether it did (else `file` is not the index's).
  bool offer(const Signature& s, const std::string& file, const CaseSize& size);

  // Deletes the folder's superseded cases (those still there) and forgets them; returns the deleted.
  std::vector<std::filesystem::path> prune();

  const std::filesystem::path& folder() const { return folder_; }
  static constexpr const char* kFileName = "signatures.kvfuzz-index";

 private:
  bool locked(const std::function<bool(std::map<std::string, Entry>&)>& f, bool may_write);  // re-reads, calls f(entries), writes back if f returns true
                                       // (under the folder's flock when may_write)
  std::filesystem::path folder_;
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // by signature id
};

}  // namespace kvf
