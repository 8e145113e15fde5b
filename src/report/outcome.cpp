// outcome.cpp — small accessors of the outcome values.
#include "outcome.h"

#include <algorithm>

namespace kvf {

StageSeconds& StageSeconds::operator+=(const StageSeconds& o) {
  draw += o.draw;
  arena_fill += o.arena_fill;
  golden += o.golden;
  handoff += o.handoff;
  target += o.target;
  copy_back += o.copy_back;
  diff += o.diff;
  return *this;
}

std::string CaseOutcome::first_kind() const {
  return verdict.pass() ? std::string() : std::string(to_string(verdict.findings.front().kind));
}

int64_t ReplayResult::passed() const {
  return std::count_if(items.begin(), items.end(), [](const ReplayItem& i) { return i.as_expected; });
}

int64_t ReplayResult::failed() const { return static_cast<int64_t>(items.size()) - passed(); }

void WorkerEvents::add(const WorkerEvents& o) {
  started += o.started;
  slowest_start_s = std::max(slowest_start_s, o.slowest_start_s);
  failed_starts += o.failed_starts;
  deaths_retried += o.deaths_retried;
  hangs_retried += o.hangs_retried;
  recycled_memory += o.recycled_memory;
  recycled_threads += o.recycled_threads;
}

int64_t CampaignResult::flaky() const {
  return std::count_if(failures.begin(), failures.end(), [](const FailureRecord& f) { return f.flaky; });
}

bool CampaignResult::save_failed() const {
  return std::any_of(failures.begin(), failures.end(), [](const FailureRecord& f) { return !f.save_error.empty(); });
}

}  // namespace kvf
