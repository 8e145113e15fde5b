// jobs.h — the -j N thread pool shared by `run` (campaign.cpp) and `compare` (compare.cpp).
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "base/errors.h"

namespace kvf {

// Runs body() on max(1, jobs) threads and waits for all of them. When a thread throws, stop() is
// called once per throwing thread (so the others can be told to finish) and, after every thread
// has ended, the first exception is rethrown here. A thread the system refuses (no address space
// for its stack, RLIMIT_NPROC) stops the others the same way and is an InfraError.
inline void run_jobs(int jobs, const std::function<void()>& body, const std::function<void()>& stop) {
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = e;
    }
    stop();
  };
  const int n = std::max(1, jobs);
  for (int j = 0; j < n; ++j) {
    try {
      threads.emplace_back([&] {
        try {
          body();
        } catch (...) {
          fail(std::current_exception());
        }
      });
    } catch (const std::system_error& e) {
      fail(std::make_exception_ptr(
          InfraError("could not start thread " + std::to_string(j + 1) + " of " + std::to_string(n) + " (-j): " + e.what())));
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kvf
