// junit.h — JUnit XML for CI (`--junit FILE`), per research/harness-anchors.md §5.2.
//
//   <testsuites><testsuite name="cuda-emu" ...><properties>…</properties>
//     <testcase classname="kvfuzz.run.cuda-emu" name="campaign, profile default" time="…">
//       <failure message="cross_request_write: request 0 (token 3) wrote into …" type="cross_request_write">
//         findings, case file, report, reproduction command</failure></testcase></testsuite></testsuites>
//
// One testsuite per target. Test names are stable across runs, so CI history lines up: a run is
// one testcase named after its profile (seed, case count and the rest are properties of the
// suite); a replay has one testcase per corpus file, named by its path, and a file outside the
// target's capabilities is a testcase with <skipped message="outside the target's capabilities:
// REASON"/>. A finding is a <failure>; a run that did not finish (crash, timeout, launch error) is
// an <error>.
#pragma once

#include <string>

#include "outcome.h"

namespace kvf {

std::string campaign_junit(const CampaignResult& r, const std::string& command_line);
std::string replay_junit(const ReplayResult& r, const std::string& command_line);

// Escapes text for XML 1.0 attribute values and character data; characters XML 1.0 forbids
// (control characters other than tab, newline, carriage return) become U+FFFD.
std::string xml_escape(const std::string& text);

}  // namespace kvf
