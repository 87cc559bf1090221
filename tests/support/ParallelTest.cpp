// forEachItem: every item runs exactly once, on at most the workers asked for (worker 0 being the
// calling thread), and a failing item's exception comes back after every item has run.
#include "support/Error.h"
#include "support/Parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

TEST(Parallel, EveryItemRunsOnceOnTheWorkersAskedFor) {
  for (size_t workers : {1, 3, 8})
    for (size_t items : {0, 1, 5, 100}) {
      std::vector<std::atomic<int>> runs(items);
      std::mutex mutex;
      std::set<size_t> seen;
      bool callerIsWorkerZero = true;
      const auto caller = std::this_thread::get_id();
      kiln::forEachItem(items, workers, [&](size_t i, size_t worker) {
        ++runs[i];
        std::lock_guard<std::mutex> lock(mutex);
        seen.insert(worker);
        if (worker == 0 && std::this_thread::get_id() != caller) callerIsWorkerZero = false;
      });
      for (size_t i = 0; i < items; ++i) EXPECT_EQ(runs[i], 1) << i << " of " << items;
      EXPECT_LE(seen.size(), std::min(items, workers));
      if (!seen.empty()) {
        EXPECT_LT(*seen.rbegin(), workers);
      }
      EXPECT_TRUE(callerIsWorkerZero);
    }
  EXPECT_GE(kiln::compileThreadLimit(), 1u);
  EXPECT_LE(kiln::compileThreadLimit(), 8u);
}

TEST(Parallel, TheFirstFailureComesBackAfterEveryItemRan) {
  std::atomic<int> ran{0};
  try {
    kiln::forEachItem(20, 4, [&](size_t i, size_t) {
      ++ran;
      if (i == 7) throw std::runtime_error("item 7");
      if (i == 12) throw std::runtime_error("item 12");
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 7");
  }
  EXPECT_EQ(ran, 20);
}

}  // namespace
