// case_json.h — corpus format (v1, v2): Case <-> JSON, strict reader, canonical hash, atomic files.
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
#include "errors.h"
#include "validate.h"

namespace kvf {

inline constexpr const char* kCaseSchemaName = "kvfuzz-case";
inline constexpr int kCaseSchemaVersion = 2;  // the newest version this kvfuzz reads and writes

// The version a case is written with: the oldest that expresses it. Every case v1 can express (family
// kv) is written as version 1, so its file, hash and name stay what they were; v2 adds "format".
int case_schema_version(const Case& c);  // 2 also for scattered positions and shared prefix blocks
inline constexpr int64_t kMaxCaseFileBytes = int64_t{64} << 20;  // read_case_file refuses larger files
inline constexpr int kMaxJsonDepth = 64;                          // deeper nesting is refused

// Parses JSON text strictly: duplicate keys in an object, nesting deeper than kMaxJsonDepth,
// trailing content, invalid UTF-8 and every syntax error are refused with an InputError naming
// `file`, the JSON path (duplicates, depth) or the byte offset (syntax). Throws nothing else except
// std::bad_alloc. Usable by any reader of user JSON (profiles, corpus files).
nlohmann::json parse_json_strict(std::string_view text, const std::string& file);

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

// 16 lowercase hex digits of the 64-bit FNV-1a hash of `text` (case_hash, finding signatures).
std::string fnv1a_hex(std::string_view text);

// Writes `text` to `file` atomically (temporary file "<file>.tmp.<pid>.<n>" in the same directory,
// fsync, rename), replacing `file` if it exists. Readers see the old file or the new one, never a
// partial one; a process killed mid-write can leave the temporary file behind (never named *.json).
// Throws InfraError on I/O failure.
void write_file_atomic(const std::filesystem::path& file, const std::string& text);

// The same, but never replaces an existing `file`: returns false (and writes nothing) if it exists.
bool write_new_file_atomic(const std::filesystem::path& file, const std::string& text);

// Writes the case as <dir>/<case_hash>.json (pretty JSON, atomically) and returns the path. Never
// overwrites: if that file already holds the same batch (same hash; saved by an earlier run, another
// thread, or the input of `kvfuzz shrink`) it is kept unchanged and its path returned; if it holds
// anything else, InfraError.
std::filesystem::path save_case(const Case& c, const std::filesystem::path& dir);

// Output paths are checked before any work (nothing found is lost to an unwritable path later).
// A directory for results (`--corpus-out`): it, or else the nearest existing folder above it, must
// be a writable directory; nothing is created. A file (`--json FILE`): "-" (stdout) always passes;
// otherwise it must not be a directory and it, or else its folder, must be writable. InputError
// naming the path and `option` otherwise.
void check_output_directory(const std::filesystem::path& dir, const std::string& option);
void check_output_file(const std::filesystem::path& file, const std::string& option);

}  // namespace kvf
