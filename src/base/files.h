// files.h — writing files so that nothing a user has is lost: atomic writes, no-clobber writes, and
// output paths checked before any work.
#pragma once

#include <filesystem>
#include <string>

namespace kvf {

// Writes `text` to `file` atomically (temporary file "<file>.tmp.<pid>.<n>" in the same directory,
// fsync, rename), replacing `file` if it exists. Readers see the old file or the new one, never a
// partial one; a process killed mid-write can leave the temporary file behind (never named *.json).
// A missing folder of `file` is made. Throws InfraError on I/O failure.
void write_file_atomic(const std::filesystem::path& file, const std::string& text);

// The same, but never replaces an existing `file`: returns false (and writes nothing) if it exists.
bool write_new_file_atomic(const std::filesystem::path& file, const std::string& text);

// Output paths are checked before any work (nothing found is lost to an unwritable path later).
// A directory for results (`--corpus-out`): it, or else the nearest existing folder above it, must
// be a writable directory; nothing is created. A file (`--json FILE`): "-" (stdout) always passes;
// otherwise it must not be a directory and it, or else its folder, must be writable. InputError
// naming the path and `option` otherwise.
void check_output_directory(const std::filesystem::path& dir, const std::string& option);
void check_output_file(const std::filesystem::path& file, const std::string& option);

// strerror's text for errno value `err`, thread-safe.
std::string errno_text(int err);

}  // namespace kvf
