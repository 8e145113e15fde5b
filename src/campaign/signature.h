// signature.h — when two failures are the same bug: a versioned finding signature, and the index of
// signatures a findings folder keeps across runs (docs/findings.md).
//
//   identity = kind | victim class | writer class          of the first (most severe) finding
//              (+ | the refusal or death message with every number as '#', for launch_error, crash, timeout)
//   features = layout | input>cache dtype | scale kind | requests | heads | padding rows | invalid slots
//              (the last four each 0, 1 or many)
//   signature v1 = "v1 " + identity + " " + features; its id: 16 hex digits of its FNV-1a hash.
//
// The shrinker keeps the identity (a launch refused at 64 heads does not shrink into an empty batch
// refused); the features describe where it ended. A campaign shrinks a failure only when the
// signature of the failing case is new to it, and saves a minimal case only when its signature is
// new to the folder's index or smaller than the case the index holds.
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
  static constexpr int kVersion = 1;
  std::string identity;  // what the shrinker keeps
  std::string features;  // the case's discrete features
  std::string text() const;  // "v1 <identity> <features>"
  std::string id() const;    // 16 hex digits
};

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
