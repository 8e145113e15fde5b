// errors.h — the error a user's bad input raises: which file, where in it, what was expected.
//
// Every reader of user input (case files, corpus directories, profiles) throws InputError; the CLI
// prints what() and exits with code 2. Nothing below the CLI calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace kvf {

class InputError : public std::runtime_error {
 public:
  // file: path as the user gave it; json_path: RFC 6901 pointer ("/requests/2/blocks/0"), or ""
  // when the problem is the file as a whole; message: what was wrong and what was expected.
  InputError(std::string file, std::string json_path, std::string message)
      : std::runtime_error(format(file, json_path, message)),
        file_(std::move(file)),
        json_path_(std::move(json_path)),
        message_(std::move(message)) {}

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, const std::string& path, const std::string& msg) {
    std::string s = file.empty() ? std::string("<input>") : file;
    if (!path.empty()) s += ": at " + path;
    return s + ": " + msg;
  }
  std::string file_, json_path_, message_;
};

// Infrastructure failure (I/O, missing device): exit code 3.
class InfraError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvf
