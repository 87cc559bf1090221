// The thread pool: every index covered exactly once, the static partition, exceptions, nested and
// concurrent calls, long runs of jobs, parked workers, and no threads for a pool of one. Plain
// (non-atomic) writes from the chunks are read by the caller after the join, so a ThreadSanitizer
// build checks that the join orders them.
#include "runtime/ThreadPool.h"

#include "support/Error.h"
#include "support/FloatMode.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::rt {
namespace {

using Chunk = std::pair<int64_t, int64_t>;

struct Recorded {
  std::vector<Chunk> chunks;  // sorted by begin
  std::vector<std::thread::id> threads;  // the threads that ran them, in the order they ran
};

// Runs one parallelFor and returns the chunks it handed out and the threads that ran them.
Recorded record(ThreadPool& pool, int64_t begin, int64_t end, int64_t grain) {
  Recorded r;
  std::mutex m;
  pool.parallelFor(begin, end, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    r.chunks.emplace_back(b, e);
    r.threads.push_back(std::this_thread::get_id());
  });
  std::sort(r.chunks.begin(), r.chunks.end());
  return r;
}

// The pool workers alive in this process, found by their thread names (other threads, such as a
// sanitizer's, do not count).
int poolWorkerCount() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name.rfind("kiln-pool-", 0) == 0;
  }
  return n;
}

// poolWorkerCount() once it equals `expected`, or after a few seconds. A joined thread can linger
// in /proc for a moment: the kernel wakes the joiner before it removes the exited task.
int poolWorkerCountSettlingAt(int expected) {
  int n = poolWorkerCount();
  for (int i = 0; i < 5000 && n != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = poolWorkerCount();
  }
  return n;
}

// The documented partition: min(threads, size / grain) chunks when size >= 2 * grain, else one;
// the first size % n chunks one iteration longer than the others.
std::vector<Chunk> expectedPartition(int threads, int64_t begin, int64_t size, int64_t grain) {
  int64_t g = std::max<int64_t>(grain, 1);
  if (size <= 0) return {};
  int64_t n = size < 2 * g ? 1 : std::min<int64_t>(threads, size / g);
  std::vector<Chunk> chunks;
  for (int64_t i = 0, b = begin; i < n; ++i) {
    int64_t length = size / n + (i < size % n ? 1 : 0);
    chunks.emplace_back(b, b + length);
    b += length;
  }
  return chunks;
}

TEST(ThreadPool, CoversEveryIndexOnceWithTheDocumentedPartition) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.threads(), threads);
    for (int64_t begin : {-5, 0, 7}) {
      for (int64_t size : {-3, 0, 1, 2, 3, 5, 7, 8, 33, 100, 1000}) {
        for (int64_t grain : {-1, 0, 1, 2, 3, 4, 16, 500}) {
          SCOPED_TRACE(testing::Message() << "threads " << threads << " range [" << begin << ", " << begin + size
                                          << ") grain " << grain);
          std::vector<Chunk> expected = expectedPartition(threads, begin, size, grain);
          std::vector<int> calls(expected.size(), 0);
          std::vector<int> hits(std::max<int64_t>(size, 0), 0);
          std::atomic<int> unexpected{0};
          // Plain writes: each chunk writes only its own slots, read here after the join.
          pool.parallelFor(begin, begin + size, grain, [&](int64_t b, int64_t e) {
            auto it = std::find(expected.begin(), expected.end(), Chunk{b, e});
            if (it == expected.end()) {
              unexpected.fetch_add(1);
              return;
            }
            ++calls[it - expected.begin()];
            for (int64_t i = b; i < e; ++i) ++hits[i - begin];
          });
          ASSERT_EQ(unexpected.load(), 0);
          for (int c : calls) ASSERT_EQ(c, 1);
          for (int64_t i = 0; i < size; ++i) ASSERT_EQ(hits[i], 1) << "index " << begin + i;
        }
      }
    }
  }
}

TEST(ThreadPool, SmallRangesRunInlineOnTheCaller) {
  ThreadPool pool(2);
  for (int64_t size : {1, 2, 7, 15}) {
    Recorded r = record(pool, 0, size, 8);
    ASSERT_EQ(r.chunks, (std::vector<Chunk>{{0, size}}));
    EXPECT_EQ(r.threads[0], std::this_thread::get_id());
  }
  Recorded r = record(pool, 0, 16, 8);
  EXPECT_EQ(r.chunks, (std::vector<Chunk>{{0, 8}, {8, 16}}));
  // Two chunks: while the caller is still in its own, the worker runs the other.
  std::atomic<bool> secondStarted{false};
  std::vector<std::thread::id> ran(2);
  pool.parallelFor(0, 16, 8, [&](int64_t b, int64_t) {
    ran[b / 8] = std::this_thread::get_id();
    if (b == 8) secondStarted.store(true);
    while (b == 0 && !secondStarted.load()) std::this_thread::yield();
  });
  EXPECT_EQ(ran[0], std::this_thread::get_id());
  EXPECT_NE(ran[1], ran[0]);
}

// The caller, done with its own chunk, runs any chunk no worker has taken yet instead of waiting
// for that worker to wake up (on one CPU the worker can hardly start before the caller has taken
// its chunk; which thread runs a chunk is not observable reliably, so not asserted). Every chunk
// runs exactly once whoever claims it, jobs after jobs, with workers awake, parked or not
// scheduled, and a worker that wakes after its job has ended touches nothing of it (each job's
// state lives on the stack of an iteration that is gone by then).
TEST(ThreadPool, EveryChunkRunsOnceWhoeverClaimsIt) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  for (bool oneCpu : {false, true}) {
    if (oneCpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &all)) {
          CPU_SET(c, &one);
          break;
        }
      ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // the workers started below inherit it
    }
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      for (int job = 0; job < 3000; ++job) {
        std::vector<std::atomic<int>> runs(static_cast<size_t>(threads));
        const int64_t size = 1 + job % (2 * threads + 3);
        pool.parallelFor(0, size, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) runs[static_cast<size_t>(i % threads)].fetch_add(1);
        });
        int total = 0;
        for (auto& r : runs) total += r.load();
        ASSERT_EQ(total, size) << threads << " threads, job " << job;
        if (job % 500 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));  // parked
      }
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
}

// copy is memcpy: every byte, for sizes around the parallel threshold and a page, odd sizes and
// offsets, and pools of one to three threads.
TEST(ThreadPool, CopyCopiesEveryByte) {
  const size_t sizes[] = {0, 1, 4095, 4097, ThreadPool::kParallelCopyBytes - 1, ThreadPool::kParallelCopyBytes,
                          3 * ThreadPool::kParallelCopyBytes + 12345};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (size_t bytes : sizes) {
      std::vector<unsigned char> src(bytes + 3), dst(bytes + 5, 0xEE);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + bytes);
      pool.copy(dst.data() + 1, src.data() + 3, bytes);
      EXPECT_EQ(dst[0], 0xEE);
      EXPECT_TRUE(std::equal(src.begin() + 3, src.end(), dst.begin() + 1))
          << bytes << " bytes, " << threads << " threads";
      for (size_t i = bytes + 1; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "past the end: " << bytes << " bytes";
    }
  }
}

TEST(ThreadPool, ExtremeRangesAreTiledExactly) {
  ThreadPool pool(2);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  for (auto [begin, end] : {Chunk{kMin, kMax}, Chunk{kMax - 10, kMax}, Chunk{kMin, kMin + 3}, Chunk{-(int64_t{1} << 62), int64_t{1} << 62}}) {
    SCOPED_TRACE(testing::Message() << "[" << begin << ", " << end << ")");
    Recorded r = record(pool, begin, end, 1);
    ASSERT_EQ(r.chunks.size(), 2u);
    EXPECT_EQ(r.chunks.front().first, begin);
    EXPECT_EQ(r.chunks[0].second, r.chunks[1].first);
    EXPECT_EQ(r.chunks.back().second, end);
  }
}

TEST(ThreadPool, AWorkersExceptionIsRethrownOnTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(2);
  std::vector<int> done(100, 0);
  try {
    pool.parallelFor(0, 100, 1, [&](int64_t b, int64_t e) {
      if (b == 50) throw Error("chunk at 50 failed");  // the worker's chunk
      for (int64_t i = b; i < e; ++i) done[i] = 1;
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chunk at 50 failed");
  }
  // The caller's chunk completed before the rethrow.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(done[i], 1);

  Recorded r = record(pool, 0, 100, 1);
  EXPECT_EQ(r.chunks, (std::vector<Chunk>{{0, 50}, {50, 100}}));
}

TEST(ThreadPool, TheCallersExceptionIsRethrownAfterTheWorkersFinish) {
  ThreadPool pool(2);
  std::vector<int> done(100, 0);
  EXPECT_THROW(pool.parallelFor(0, 100, 1,
                                [&](int64_t b, int64_t e) {
                                  if (b == 0) throw std::runtime_error("caller's chunk");
                                  for (int64_t i = b; i < e; ++i) done[i] = 1;
                                }),
               std::runtime_error);
  for (int i = 50; i < 100; ++i) EXPECT_EQ(done[i], 1);  // joined before the rethrow
}

TEST(ThreadPool, WhenEveryChunkThrowsOneExceptionComesBack) {
  ThreadPool pool(2);
  for (int round = 0; round < 100; ++round) {
    try {
      pool.parallelFor(0, 2, 1, [](int64_t b, int64_t) { throw std::runtime_error(std::to_string(b)); });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(std::string(e.what()) == "0" || std::string(e.what()) == "1") << e.what();
    }
  }
  Recorded r = record(pool, 0, 4, 1);
  EXPECT_EQ(r.chunks, (std::vector<Chunk>{{0, 2}, {2, 4}}));  // no exception left over
}

TEST(ThreadPool, NestedCallsRunInlineOnTheThreadThatIssuedThem) {
  ThreadPool pool(2);
  ThreadPool other(2);
  std::vector<int> hits(64 * 64, 0);
  std::vector<int> inlineOnIssuer(64, 0);
  pool.parallelFor(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      std::thread::id self = std::this_thread::get_id();
      bool sameThread = true;
      // The same pool and another pool: both are nested here.
      ThreadPool& inner = row % 2 ? pool : other;
      inner.parallelFor(0, 64, 1, [&](int64_t ib, int64_t ie) {
        sameThread = sameThread && std::this_thread::get_id() == self && ib == 0 && ie == 64;
        for (int64_t i = ib; i < ie; ++i) ++hits[row * 64 + i];
      });
      inlineOnIssuer[row] = sameThread;
    }
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  for (int row = 0; row < 64; ++row) EXPECT_EQ(inlineOnIssuer[row], 1) << "row " << row;
}

TEST(ThreadPool, TenThousandConsecutiveJobs) {
  ThreadPool pool(2);
  std::vector<int64_t> sums(2, 0);
  int64_t expected = 0;
  for (int job = 0; job < 10000; ++job) {
    int64_t size = job % 7 == 0 ? 3 : 64;  // some run inline, most fork
    pool.parallelFor(0, size, 2, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sums[b == 0 ? 0 : 1] += i;
    });
    expected += size * (size - 1) / 2;
  }
  EXPECT_EQ(sums[0] + sums[1], expected);
  EXPECT_GT(sums[1], 0);  // the worker took part
}

TEST(ThreadPool, ParkedWorkersWakeForTheNextJob) {
  ThreadPool pool(2);
  for (int round = 0; round < 5; ++round) {
    // Longer than the pool polls (100 µs): the worker is asleep on its futex when the job comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    Recorded r = record(pool, 0, 10, 1);
    ASSERT_EQ(r.chunks, (std::vector<Chunk>{{0, 5}, {5, 10}}));
  }
  // A worker chunk that outlasts the caller's polling makes the caller sleep at the join.
  std::vector<int> done(2, 0);
  pool.parallelFor(0, 2, 1, [&](int64_t b, int64_t) {
    if (b == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    done[b] = 1;
  });
  EXPECT_EQ(done, (std::vector<int>{1, 1}));
}

TEST(ThreadPool, DestructionWhileIdleJoinsTheWorkers) {
  int before = poolWorkerCountSettlingAt(0);
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(2);
    if (round % 2) record(pool, 0, 10, 1);
    if (round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // parked
  }
  EXPECT_EQ(poolWorkerCountSettlingAt(before), before);
}

TEST(ThreadPool, ThreadsAreStartedOnceAndAPoolOfOneStartsNone) {
  int before = poolWorkerCountSettlingAt(0);
  {
    ThreadPool pool(1);
    EXPECT_EQ(poolWorkerCount(), before);
    Recorded r = record(pool, 0, 1000, 1);
    EXPECT_EQ(r.chunks, (std::vector<Chunk>{{0, 1000}}));
    EXPECT_EQ(r.threads[0], std::this_thread::get_id());
    EXPECT_EQ(poolWorkerCount(), before);
  }
  {
    ThreadPool pool(2);
    EXPECT_EQ(poolWorkerCount(), before + 1);
    for (int job = 0; job < 100; ++job) record(pool, 0, 10, 1);
    EXPECT_EQ(poolWorkerCount(), before + 1);
  }
  EXPECT_EQ(poolWorkerCountSettlingAt(before), before);
}

TEST(ThreadPool, ThreadCountZeroMeansOnePerHardwareThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.threads(), std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  EXPECT_THROW(ThreadPool(-1), Error);
}

TEST(ThreadPool, ConcurrentCallersEachGetACompleteJob) {
  ThreadPool pool(2);
  auto caller = [&pool](std::vector<int>& hits) {
    for (int job = 0; job < 500; ++job)
      pool.parallelFor(0, static_cast<int64_t>(hits.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
  };
  std::vector<int> a(32, 0), b(32, 0);
  std::thread other(caller, std::ref(b));
  caller(a);
  other.join();
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(a[i], 500);
    EXPECT_EQ(b[i], 500);
  }
}

struct Sum {
  std::vector<int64_t> partial;
};

void addRange(void* ctx, int64_t b, int64_t e) {
  auto* s = static_cast<Sum*>(ctx);
  for (int64_t i = b; i < e; ++i) s->partial[b == 0 ? 0 : 1] += i;
}

// Runs one runAwake job (as record() does a parallelFor).
Recorded recordAwake(ThreadPool& pool, int64_t begin, int64_t end, int64_t grain) {
  Recorded r;
  std::mutex m;
  auto chunk = [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    r.chunks.emplace_back(b, e);
    r.threads.push_back(std::this_thread::get_id());
  };
  using Fn = decltype(chunk);
  pool.runAwake(begin, end, grain, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); }, &chunk);
  std::sort(r.chunks.begin(), r.chunks.end());
  return r;
}

// Waits (up to a few seconds) until `n` of the pool's workers are parked on their futexes.
bool parkedSettlingAt(const ThreadPool& pool, int n) {
  for (int i = 0; i < 5000; ++i) {
    if (pool.parkedWorkers() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A job for awake workers only runs inline, in one piece, while its worker is parked, and wakes
// nobody unless it follows another such job within the workers' polling time; a stream of them
// wakes the worker, and then splits as parallelFor does. Every job covers its range once either way.
TEST(ThreadPool, AwakeOnlyJobsRunInlineWhileTheWorkerIsParked) {
  ThreadPool pool(2);
  ASSERT_TRUE(parkedSettlingAt(pool, 1));
  const Recorded alone = recordAwake(pool, 0, 10, 1);
  EXPECT_EQ(alone.chunks, (std::vector<Chunk>{{0, 10}}));
  EXPECT_EQ(alone.threads, (std::vector<std::thread::id>{std::this_thread::get_id()}));
  // Isolated jobs (each long after the last) leave the worker parked.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(recordAwake(pool, 0, 10, 1).chunks, (std::vector<Chunk>{{0, 10}}));
  }
  EXPECT_TRUE(parkedSettlingAt(pool, 1)) << "an isolated awake-only job woke the worker";
  // Back to back: the worker wakes and takes its chunk of a later job.
  bool split = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!split && std::chrono::steady_clock::now() < deadline) {
    const Recorded r = recordAwake(pool, 0, 10, 1);
    if (r.chunks.size() == 1) {
      ASSERT_EQ(r.chunks, (std::vector<Chunk>{{0, 10}}));
      continue;
    }
    ASSERT_EQ(r.chunks, expectedPartition(2, 0, 10, 1));
    split = std::find(r.threads.begin(), r.threads.end(), std::this_thread::get_id()) != r.threads.end() &&
            std::any_of(r.threads.begin(), r.threads.end(), [](auto id) { return id != std::this_thread::get_id(); });
  }
  EXPECT_TRUE(split) << "a stream of awake-only jobs never reached the worker";
  // The C entry point takes a negative grain for runAwake: covered once, whoever runs it.
  Sum s{{0, 0}};
  kiln_parallel_for(&pool, 0, 1000, -100, addRange, &s);
  EXPECT_EQ(s.partial[0] + s.partial[1], 999 * 1000 / 2);
  kiln_parallel_for(&pool, 0, 1000, INT64_MIN, addRange, &s);  // grain INT64_MAX: inline
  EXPECT_EQ(s.partial[0] + s.partial[1], 999 * 1000);
}

TEST(ThreadPool, CEntryPointRunsOnTheGivenPool) {
  ThreadPool pool(2);
  Sum s{{0, 0}};
  kiln_parallel_for(&pool, 0, 1000, 100, addRange, &s);
  EXPECT_EQ(s.partial[0] + s.partial[1], 999 * 1000 / 2);
  EXPECT_GT(s.partial[1], 0);
}

// Sets KILN_THREADS for the lifetime of the object, then restores it.
class ScopedKilnThreads {
 public:
  explicit ScopedKilnThreads(const char* value) {
    if (const char* old = std::getenv("KILN_THREADS")) saved_ = old;
    setenv("KILN_THREADS", value, 1);
  }
  ~ScopedKilnThreads() {
    if (saved_)
      setenv("KILN_THREADS", saved_->c_str(), 1);
    else
      unsetenv("KILN_THREADS");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(ThreadPool, KilnThreadsIsANonNegativeCount) {
  for (auto [text, count] : {std::pair<const char*, int>{"", 0}, {"0", 0}, {"1", 1}, {"16", 16}}) {
    ScopedKilnThreads env(text);
    EXPECT_EQ(ThreadPool::threadsFromEnvironment(), count) << "'" << text << "'";
  }
  for (const char* bad : {"abc", "-1", "2x", " 2", "99999999999"}) {
    ScopedKilnThreads env(bad);
    try {
      ThreadPool::threadsFromEnvironment();
      ADD_FAILURE() << "accepted KILN_THREADS='" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "KILN_THREADS='" + std::string(bad) +
                                           "' is not a thread count: expected a non-negative integer (0: one "
                                           "per hardware thread)");
    }
  }
}

// The only test that creates the global pool; when it runs first in its process (as under ctest)
// the pool has the KILN_THREADS size set here.
TEST(ThreadPool, GlobalPoolIsCreatedOnceAndServesTheNullPool) {
  ScopedKilnThreads env("2");
  ThreadPool& global = ThreadPool::global();
  EXPECT_EQ(global.threads(), 2);
  EXPECT_EQ(&ThreadPool::global(), &global);
  Sum s{{0, 0}};
  kiln_parallel_for(nullptr, 0, 1000, 1, addRange, &s);  // null: the global pool
  EXPECT_EQ(s.partial[0] + s.partial[1], 999 * 1000 / 2);
  EXPECT_GT(s.partial[1], 0);
}

// Every chunk runs in the caller's floating-point mode (support/FloatMode.h), whatever mode the
// worker ran its previous job in: here x86's rounding toward zero and flushed subnormals, then
// the default again.
TEST(ThreadPool, ChunksRunInTheCallersFloatMode) {
  ThreadPool pool(4);
  const uint32_t original = floatControl();
  const uint32_t modes[] = {original | 0x6000u | 0x8040u, original};  // RC = toward zero; FTZ + DAZ
  for (uint32_t mode : modes) {
    setFloatControl(mode);
    const uint32_t expected = floatControl();  // 0 where there is no such word
    std::vector<uint32_t> seen(4, ~0u);
    std::atomic<int> started{0};
    pool.parallelFor(0, 4, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)] = floatControl();
      started.fetch_add(1);
      // The caller stays in its chunk until the others have started, so the workers run theirs.
      while (b == 0 && started.load() < 4) std::this_thread::yield();
    });
    setFloatControl(original);
    for (uint32_t s : seen) EXPECT_EQ(s & ~kFloatFlags, expected & ~kFloatFlags);
  }
}

}  // namespace
}  // namespace kiln::rt
