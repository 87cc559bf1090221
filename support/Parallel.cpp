#include "support/Parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace kiln {

std::size_t compileThreadLimit() { return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8); }

void forEachItem(std::size_t items, std::size_t workers, const std::function<void(std::size_t, std::size_t)>& fn) {
  std::vector<std::exception_ptr> errors(items);
  std::atomic<std::size_t> next{0};
  auto work = [&](std::size_t worker) {
    for (std::size_t i = next++; i < items; i = next++) {
      try {
        fn(i, worker);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < std::min(items, workers); ++t) threads.emplace_back(work, t);
  work(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace kiln
