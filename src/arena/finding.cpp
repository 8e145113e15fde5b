// finding.cpp — names of finding kinds (used in reports, JSON and corpus expectations).
#include "finding.h"

namespace kvf {

std::string_view to_string(FindingKind k) {
  switch (k) {
    case FindingKind::oob_write: return "oob_write";
    case FindingKind::cross_request_write: return "cross_request_write";
    case FindingKind::stray_write: return "stray_write";
    case FindingKind::padding_leak: return "padding_leak";
    case FindingKind::wrong_value: return "wrong_value";
    case FindingKind::missing_write: return "missing_write";
    case FindingKind::scale_mismatch: return "scale_mismatch";
    case FindingKind::input_modified: return "input_modified";
    case FindingKind::oob_read_suspected: return "oob_read_suspected";
    case FindingKind::invalid_slot_miscount: return "invalid_slot_miscount";
    case FindingKind::slot_mapping_mismatch: return "slot_mapping_mismatch";
    case FindingKind::crash: return "crash";
    case FindingKind::timeout: return "timeout";
    case FindingKind::launch_error: return "launch_error";
  }
  return "unknown";
}

int severity(FindingKind k) {
  switch (k) {
    case FindingKind::slot_mapping_mismatch: return 0;
    case FindingKind::oob_write: return 1;
    case FindingKind::cross_request_write: return 2;
    case FindingKind::padding_leak: return 3;
    case FindingKind::stray_write: return 4;
    case FindingKind::input_modified: return 5;
    case FindingKind::oob_read_suspected: return 6;
    case FindingKind::wrong_value: return 7;
    case FindingKind::scale_mismatch: return 8;
    case FindingKind::missing_write: return 9;
    case FindingKind::invalid_slot_miscount: return 10;
    case FindingKind::crash:
    case FindingKind::timeout:
    case FindingKind::launch_error: break;  // outcomes of a run, not of a comparison
  }
  return 11;
}

}  // namespace kvf
