// outcome.cpp — small accessors of the outcome values.
#include "report/outcome.h"

#include <algorithm>

namespace kvf {

std::string CaseOutcome::first_kind() const {
  return verdict.pass() ? std::string() : std::string(to_string(verdict.findings.front().kind));
}

int64_t ReplayResult::passed() const {
  return std::count_if(items.begin(), items.end(), [](const ReplayItem& i) { return i.as_expected; });
}

int64_t ReplayResult::failed() const { return static_cast<int64_t>(items.size()) - passed(); }

}  // namespace kvf
