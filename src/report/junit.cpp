// junit.cpp — see junit.h.
#include "junit.h"

#include <cstdio>
#include <sstream>

#include "cell_map.h"

namespace kvf {

namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

bool did_not_finish(const Verdict& v) {
  if (v.pass()) return false;
  const FindingKind k = v.findings.front().kind;
  return k == FindingKind::crash || k == FindingKind::timeout || k == FindingKind::launch_error;
}

std::string first_kind(const Verdict& v) { return v.pass() ? "pass" : std::string(to_string(v.findings.front().kind)); }

std::string findings_text(const Verdict& v) {
  std::string s;
  for (const Finding& f : v.findings) s += std::string(to_string(f.kind)) + ": " + f.sentence + "\n";
  if (!v.findings.empty() && !v.findings.front().example.empty()) s += "first cell: " + v.findings.front().example + "\n";
  return s;
}

void property(std::ostringstream& o, const std::string& name, const std::string& value) {
  o << "      <property name=\"" << xml_escape(name) << "\" value=\"" << xml_escape(value) << "\"/>\n";
}

// <failure> or <error> of one failing verdict.
void problem(std::ostringstream& o, const Verdict& v, const std::string& message, const std::string& body) {
  const char* tag = did_not_finish(v) ? "error" : "failure";
  o << "      <" << tag << " message=\"" << xml_escape(message) << "\" type=\"" << xml_escape(first_kind(v)) << "\">"
    << xml_escape(body) << "</" << tag << ">\n";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string s;
  s.reserve(text.size());
  for (unsigned char ch : text) {
    switch (ch) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&quot;"; break;
      case '\'': s += "&apos;"; break;
      default:
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          s += "\xEF\xBF\xBD";
        } else {
          s += static_cast<char>(ch);
        }
    }
  }
  return s;
}

std::string campaign_junit(const CampaignResult& r, const std::string& command_line) {
  int64_t errors = 0;
  for (const FailureRecord& f : r.failures) errors += did_not_finish(f.verdict);
  const bool failed = !r.failures.empty();
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"kvfuzz\" tests=\"1\" failures=\"" << (failed && !errors) << "\" errors=\"" << (errors > 0)
    << "\" time=\"" << seconds_text(r.seconds) << "\">\n";
  o << "  <testsuite name=\"" << xml_escape(r.target) << "\" tests=\"1\" failures=\"" << (failed && !errors) << "\" errors=\""
    << (errors > 0) << "\" skipped=\"0\" time=\"" << seconds_text(r.seconds) << "\">\n";
  o << "    <properties>\n";
  property(o, "seed", r.seed);
  property(o, "profile", r.profile);
  property(o, "target", r.target);
  property(o, "cases", std::to_string(r.cases));
  property(o, "passed", std::to_string(r.passed));
  property(o, "failed", std::to_string(r.failed));
  property(o, "interrupted", r.interrupted ? "true" : "false");
  property(o, "command_line", command_line);
  property(o, "tool_version", KVFUZZ_VERSION);
  o << "    </properties>\n";
  o << "    <testcase classname=\"kvfuzz.run." << xml_escape(r.target) << "\" name=\"campaign, profile " << xml_escape(r.profile)
    << "\" time=\"" << seconds_text(r.seconds) << "\">\n";
  if (failed) {
    // One <failure> (or <error>) per testcase; it lists every failure the campaign saved.
    const FailureRecord& first = r.failures.front();
    std::string message = first_kind(first.verdict) + ": " + first.verdict.findings.front().sentence;
    if (r.failures.size() > 1) message += " (and " + std::to_string(r.failures.size() - 1) + " more failures)";
    std::string body;
    for (const FailureRecord& f : r.failures) {
      body += (f.flaky ? "FLAKY " : "FAIL ") + first_kind(f.verdict) + " in " + f.file.string() + "\n" + findings_text(f.verdict);
      body += "report: " + (report_dir_for(f.file) / "report.html").string() + "\n";
      body += "reproduce: " + f.replay_command + "\n";
      if (!f.locate_command.empty()) body += "locate: " + f.locate_command + "\n";
      body += "\n";
    }
    problem(o, first.verdict, message, body);
  }
  o << "      <system-out>" << xml_escape("kvfuzz: " + std::to_string(r.passed) + " passed, " + std::to_string(r.failed) + " failed")
    << "</system-out>\n";
  o << "    </testcase>\n  </testsuite>\n</testsuites>\n";
  return o.str();
}

std::string replay_junit(const ReplayResult& r, const std::string& command_line) {
  int64_t failures = 0, errors = 0;
  for (const ReplayItem& i : r.items) {
    if (i.as_expected) continue;
    (did_not_finish(i.outcome.verdict) ? errors : failures) += 1;
  }
  const auto skipped = static_cast<int64_t>(r.skipped_files.size());
  const auto tests = static_cast<int64_t>(r.items.size()) + skipped;
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"kvfuzz\" tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" time=\""
    << seconds_text(r.seconds) << "\">\n";
  o << "  <testsuite name=\"" << xml_escape(r.target) << "\" tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\""
    << errors << "\" skipped=\"" << skipped << "\" time=\"" << seconds_text(r.seconds) << "\">\n";
  o << "    <properties>\n";
  property(o, "target", r.target);
  property(o, "interrupted", r.interrupted ? "true" : "false");
  property(o, "command_line", command_line);
  property(o, "tool_version", KVFUZZ_VERSION);
  o << "    </properties>\n";
  for (const ReplayItem& i : r.items) {
    const std::string file = i.file.string();
    o << "    <testcase classname=\"kvfuzz.replay." << xml_escape(i.target) << "\" name=\"" << xml_escape(file) << "\" time=\""
      << seconds_text(i.outcome.seconds) << "\">\n";
    const std::string got = i.outcome.pass() ? std::string("pass") : "fail:" + i.outcome.first_kind();
    if (!i.as_expected) {
      std::string message = "on " + i.target + ": expected " + i.expected.text() + ", got " + got;
      if (!i.outcome.pass()) message += ": " + i.outcome.verdict.findings.front().sentence;
      const std::string body = findings_text(i.outcome.verdict) + "reproduce: " + i.replay_command + "\nreport: " + i.report_command +
                               "\n" + (i.locate_command.empty() ? std::string() : "locate: " + i.locate_command + "\n");
      if (i.outcome.pass()) {
        o << "      <failure message=\"" << xml_escape(message) << "\" type=\"unexpected_pass\">" << xml_escape(body) << "</failure>\n";
      } else {
        problem(o, i.outcome.verdict, message, body);
      }
    } else {
      o << "      <system-out>" << xml_escape("as expected on " + i.target + ": " + got) << "</system-out>\n";
    }
    o << "    </testcase>\n";
  }
  for (const SkippedFile& f : r.skipped_files) {
    o << "    <testcase classname=\"kvfuzz.replay." << xml_escape(r.target) << "\" name=\"" << xml_escape(f.file.string())
      << "\" time=\"0.000\">\n";
    o << "      <skipped message=\"" << xml_escape(is_kernel_skip(f.reason) ? f.reason : "outside the target's capabilities: " + f.reason) << "\"/>\n";
    o << "    </testcase>\n";
  }
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace kvf
