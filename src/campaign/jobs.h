// jobs.h — the -j N thread pool shared by `run` (campaign.cpp) and `compare` (compare.cpp).
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvf {

// Runs body() on max(1, jobs) threads and waits for all of them. When a thread throws, stop() is
// called once per throwing thread (so the others can be told to finish) and, after every thread
// has ended, the first exception is rethrown here.
inline void run_jobs(int jobs, const std::function<void()>& body, const std::function<void()>& stop) {
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  for (int j = 0; j < std::max(1, jobs); ++j) {
    threads.emplace_back([&] {
      try {
        body();
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
        stop();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kvf
