// merge.cpp — see merge.h.
#include "merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "campaign.h"
#include "signature.h"
#include "stats.h"
#include "case/case_json.h"
#include "base/errors.h"

namespace kvf {

MergeResult merge_cases(const MergeOptions& o) {
  check_output_directory(o.out, "merge's OUT");
  std::vector<std::filesystem::path> paths = o.inputs;
  std::error_code ec;
  if (std::filesystem::is_directory(o.out, ec)) paths.insert(paths.begin(), o.out);
  const std::vector<std::filesystem::path> files = find_case_files(paths);
  std::vector<Case> cases;  // every file read first: a bad one means nothing is written
  cases.reserve(files.size());
  for (const auto& f : files) cases.push_back(read_case_file(f, o.limits));

  // What became of each file; every one ends as exactly one of these.
  enum class Fate { unchecked, in_out, copied, not_copied, no_new_coverage };
  std::vector<Fate> fate(files.size(), Fate::unchecked);

  MergeResult r;
  std::map<std::string, OpenTarget> targets = open_targets_for(o, cases, files, r.targets);  // before the first runs
  FindingsIndex index(o.out);
  r.read = static_cast<int64_t>(files.size());
  std::map<std::string, size_t> signatures;  // failing: signature id -> case index of the smallest
  std::map<std::string, size_t> passing;     // passing: case hash -> case index (the first)
  std::vector<Signature> signature(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    if (stop_requested()) break;
    OpenTarget& t = targets.at(target_for(o, cases[i]));
    const CaseOutcome outcome = check_case(*t.isolator, cases[i], t.check.tolerance);
    const bool in_out = std::filesystem::equivalent(files[i].parent_path(), o.out, ec);
    fate[i] = in_out ? Fate::in_out : Fate::not_copied;  // until it is copied below
    if (outcome.pass()) {
      passing.emplace(case_hash(cases[i]), i);
      continue;
    }
    ++r.failing;
    signature[i] = signature_of(cases[i], outcome.verdict);
    auto [it, inserted] = signatures.try_emplace(signature[i].id(), i);
    if (!inserted && size_of(cases[i]) < size_of(cases[it->second])) it->second = i;
  }
  r.signatures = static_cast<int64_t>(signatures.size());

  for (const auto& [id, i] : signatures) {
    const std::optional<FindingsIndex::Entry> e = index.find(id);
    if (e && !(size_of(cases[i]) < e->size)) continue;  // OUT has one as small: not copied
    const bool there = fate[i] == Fate::in_out;
    const std::filesystem::path saved = there ? files[i] : save_case(cases[i], o.out);
    if (!there) fate[i] = Fate::copied;
    index.offer(signature[i], std::filesystem::relative(saved, o.out).string(), size_of(cases[i]));
  }
  // With coverage, the buckets covered so far: every case that stays in OUT (its own files and
  // the failing cases kept).
  std::set<std::string> covered;
  const auto cover = [&](const Case& c) {
    bool adds = false;
    for (std::string& b : feature_buckets(c)) adds = covered.insert(std::move(b)).second || adds;
    return adds;
  };
  std::vector<std::pair<size_t, const std::string*>> candidates;  // (case, its hash): passing inputs, smallest first
  for (const auto& [hash, i] : passing) {
    if (fate[i] != Fate::in_out) {
      candidates.emplace_back(i, &hash);
    } else if (o.coverage) {
      cover(cases[i]);
    }
  }
  if (o.coverage)
    for (const auto& [id, i] : signatures) cover(cases[i]);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const auto& a, const auto& b) { return size_of(cases[a.first]) < size_of(cases[b.first]); });
  for (const auto& [i, hash] : candidates) {
    if (std::filesystem::exists(o.out / (*hash + ".json"), ec)) continue;  // the same case is in OUT
    if (o.coverage && !cover(cases[i])) {
      fate[i] = Fate::no_new_coverage;
      continue;
    }
    save_case(cases[i], o.out);
    fate[i] = Fate::copied;
  }
  for (const Fate f : fate) {
    switch (f) {
      case Fate::unchecked: ++r.unchecked; break;
      case Fate::in_out: ++r.in_out; break;
      case Fate::copied: ++r.copied; break;
      case Fate::not_copied: ++r.not_copied; break;
      case Fate::no_new_coverage: ++r.no_new_coverage; break;
    }
  }
  if (o.coverage) r.buckets = static_cast<int64_t>(covered.size());
  if (o.prune) r.pruned = index.prune();
  return r;
}

}  // namespace kvf
