// files.cpp — atomic and no-clobber writes, output-path checks (files.h).
#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <system_error>

#include "errors.h"

namespace kvf {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

namespace {

// A temporary name unique to this process and call: "<file>.tmp.<pid>.<n>". Never ends in ".json",
// so replay and corpus directories never pick one up; a kill -9 mid-write can leave one behind,
// never a partial <file>.
std::filesystem::path temp_name(const std::filesystem::path& file) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  return tmp;
}

// Writes `text` to a new temporary file beside `file` and syncs it; returns its name.
std::filesystem::path write_temp(const std::filesystem::path& file, const std::string& text) {
  // A missing folder of the file is made, as check_output_file() allowed (`--json results/s.json`).
  if (file.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    if (ec) throw InfraError("cannot write " + file.string() + ": cannot create its folder: " + ec.message());
  }
  const std::filesystem::path tmp = temp_name(file);
  const auto fail = [&](const std::string& what, int err, bool remove_tmp) {
    if (remove_tmp) ::unlink(tmp.c_str());
    throw InfraError("cannot write " + file.string() + ": " + what + " " + tmp.string() + ": " + errno_text(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", errno, false);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("write failed on", err, true);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("fsync failed on", err, true);
  }
  if (::close(fd) != 0) fail("close failed on", errno, true);
  return tmp;
}

// Makes a rename in the directory of `file` durable; best effort (some file systems refuse fsync on
// directories).
void sync_parent(const std::filesystem::path& file) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_file_atomic(const std::filesystem::path& file, const std::string& text) {
  const std::filesystem::path tmp = write_temp(file, text);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw InfraError("cannot write " + file.string() + ": cannot rename " + tmp.string() + ": " + errno_text(err));
  }
  sync_parent(file);
}

bool write_new_file_atomic(const std::filesystem::path& file, const std::string& text) {
  const std::filesystem::path tmp = write_temp(file, text);
  // link() fails with EEXIST instead of replacing: the no-clobber rename every file system has.
  int rc = ::link(tmp.c_str(), file.c_str());
  int err = errno;
  if (rc != 0 && (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS)) {
    // A file system without hard links: check, then rename (a race with another writer of the same
    // name can replace its file, never leave a partial one).
    struct stat st {};
    if (::lstat(file.c_str(), &st) == 0) {
      rc = -1;
      err = EEXIST;
    } else {
      rc = ::rename(tmp.c_str(), file.c_str());
      err = errno;
    }
  }
  ::unlink(tmp.c_str());
  if (rc != 0 && err == EEXIST) return false;
  if (rc != 0)
    throw InfraError("cannot write " + file.string() + ": cannot link " + tmp.string() + ": " + errno_text(err));
  sync_parent(file);
  return true;
}

namespace {

// Writable for this process's effective user, on a writable file system.
bool writable(const std::filesystem::path& p) { return ::faccessat(AT_FDCWD, p.c_str(), W_OK, AT_EACCESS) == 0; }

// The nearest existing folder at or above `p` (a relative path ends at ".").
std::filesystem::path nearest_existing(std::filesystem::path p) {
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec)) p = p.parent_path();
  return p.empty() ? std::filesystem::path(".") : p;
}

}  // namespace

void check_output_directory(const std::filesystem::path& dir, const std::string& option) {
  std::error_code ec;
  const std::filesystem::path at = nearest_existing(dir);
  if (!std::filesystem::is_directory(at, ec)) {
    throw InputError(dir.string(), "",
                     (at == dir ? "exists and is not a directory" : at.string() + " is not a directory") +
                         std::string("; ") + option + " expects a directory");
  }
  if (!writable(at)) {
    const int err = errno;
    throw InputError(
        dir.string(), "",
        (at == dir ? std::string("is not writable") : "cannot be created: " + at.string() + " is not writable") + " (" +
            errno_text(err) + "); " + option + " needs a directory kvfuzz can write");
  }
}

void check_output_file(const std::filesystem::path& file, const std::string& option) {
  if (file.empty() || file == "-") return;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw InputError(file.string(), "", "is a directory; " + option + " expects a file");
  if (std::filesystem::exists(file, ec)) {
    if (!writable(file)) {
      const int err = errno;
      throw InputError(file.string(), "",
                       "is not writable (" + errno_text(err) + "); " + option + " needs a file kvfuzz can write");
    }
    return;
  }
  check_output_directory(file.has_parent_path() ? file.parent_path() : std::filesystem::path("."),
                         option + "'s folder");
}

}  // namespace kvf
