// case_json.h — corpus format (v1, v2): Case <-> JSON, the typed reader, canonical hash, saving cases.
//
// File layout (schema "kvfuzz-case", versions 1 and 2): see docs/corpus-format.md. Seeds and other 64-bit
// identifiers are decimal strings (jq and JavaScript lose uint64 precision). The reader is strict:
// unknown keys, missing keys, wrong types, out-of-range numbers, an unknown schema version (with
// "written by a newer kvfuzz" when it is higher) and semantic inconsistencies (validate.h) are all
// refused with an InputError naming the file and the JSON path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "case.h"
#include "base/errors.h"
#include "base/files.h"  // write_file_atomic, check_output_* (formerly declared here)
#include "base/hash.h"   // fnv1a_hex
#include "base/json.h"   // parse_json_strict
#include "validate.h"

namespace kvf {

inline constexpr const char* kCaseSchemaName = "kvfuzz-case";
inline constexpr int kCaseSchemaVersion = 2;  // the newest version this kvfuzz reads and writes

// The version a case is written with: the oldest that expresses it. Every case v1 can express (family
// kv) is written as version 1, so its file, hash and name stay what they were; v2 adds "format".
int case_schema_version(const Case& c);  // 2 also for scattered positions and shared prefix blocks
inline constexpr int64_t kMaxCaseFileBytes = int64_t{64} << 20;  // read_case_file refuses larger files

nlohmann::json case_to_json(const Case& c);

// Checks every key and type, then validate(); the first problems (up to 5) become one InputError
// whose json_path is the first problem's. `file` is used in error messages only. Throws only
// InputError, whatever JSON value it is given.
Case case_from_json(const nlohmann::json& j, const std::string& file, const Limits& limits = {});

// parse_json_strict + case_from_json: the whole reader on in-memory text (the fuzzing entry point).
// Throws only InputError (running out of memory while parsing becomes one too).
Case case_from_text(std::string_view text, const std::string& file, const Limits& limits = {});

// Reads a case file: refuses a missing file, a directory or other non-regular file, and files over
// kMaxCaseFileBytes before reading; then case_from_text. Throws only InputError.
Case read_case_file(const std::filesystem::path& file, const Limits& limits = {});

// The "schema" string of the JSON object in `file` ("kvfuzz-case", "kvfuzz-summary", ...); "" when
// the file cannot be read, is larger than kMaxCaseFileBytes, is not strict JSON, is not an object
// or has no string "schema". Throws nothing except std::bad_alloc. Lets `replay DIR` tell other
// kvfuzz outputs from cases, and outputs refuse to replace a case.
std::string json_file_schema(const std::filesystem::path& file);

// Content hash of the case, 16 lowercase hex digits: FNV-1a 64 over case_to_json(c).dump() with
// "provenance" and "expect" removed (default json sorts keys, so dump() is canonical). Equal
// batches get equal names whatever run found them and whatever outcome they are expected to have.
// The genotype, when present, is part of the hash.
std::string case_hash(const Case& c);

// Writes the case as <dir>/<case_hash>.json (pretty JSON, atomically) and returns the path. Never
// overwrites: if that file already holds the same batch (same hash; saved by an earlier run, another
// thread, or the input of `kvfuzz shrink`) it is kept unchanged and its path returned; if it holds
// anything else, InfraError.
std::filesystem::path save_case(const Case& c, const std::filesystem::path& dir);

}  // namespace kvf
