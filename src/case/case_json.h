// case_json.h — corpus format v1: Case <-> JSON, strict reader, canonical hash, atomic files.
//
// File layout (schema "kvfuzz-case", version 1): see README "Corpus format". Seeds and other 64-bit
// identifiers are decimal strings (jq and JavaScript lose uint64 precision). The reader is strict:
// unknown keys, missing keys, wrong types, out-of-range numbers, an unknown schema version (with
// "written by a newer kvfuzz" when it is higher) and semantic inconsistencies (validate.h) are all
// refused with an InputError naming the file and the JSON path.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "case.h"
#include "validate.h"

namespace kvf {

inline constexpr int kCaseSchemaVersion = 1;

nlohmann::json case_to_json(const Case& c);

// Parses and validates. `file` is used in error messages only.
Case case_from_json(const nlohmann::json& j, const std::string& file, const Limits& limits = {});

// Reads a case file: size-checked before parsing, then case_from_json.
Case read_case_file(const std::filesystem::path& file, const Limits& limits = {});

// Content hash of the case (FNV-1a 64 over the canonical JSON without provenance), 16 hex digits.
// Equal batches get equal names whatever run found them.
std::string case_hash(const Case& c);

// Writes `text` to `file` atomically (temporary file in the same directory, fsync, rename).
// Throws InfraError on I/O failure.
void write_file_atomic(const std::filesystem::path& file, const std::string& text);

// Writes the case as <dir>/<case_hash>.json (pretty JSON, atomically) and returns the path.
std::filesystem::path save_case(const Case& c, const std::filesystem::path& dir);

}  // namespace kvf
