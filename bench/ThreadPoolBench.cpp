// The thread pool's fork/join cost: an empty parallelFor split into one chunk per thread, back to
// back (the worker still polling, as between the kernels of a step) and after a pause long enough
// for the worker to park on its futex (the first kernel of a step). threads = 1 is the inline
// baseline. See docs/ARCHITECTURE.md, "Thread pool".
#include "runtime/ThreadPool.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <thread>

namespace {

void emptyChunk(void*, int64_t, int64_t) {}

void BM_ForkJoin(benchmark::State& state) {
  kiln::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  int64_t n = pool.threads();
  for (auto _ : state) pool.parallelFor(0, n, 1, [](int64_t b, int64_t e) { benchmark::DoNotOptimize(b + e); });
}
BENCHMARK(BM_ForkJoin)->ArgName("threads")->Arg(1)->Arg(2);

void BM_ForkJoinCEntry(benchmark::State& state) {
  kiln::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  int64_t n = pool.threads();
  for (auto _ : state) kiln_parallel_for(&pool, 0, n, 1, emptyChunk, nullptr);
}
BENCHMARK(BM_ForkJoinCEntry)->ArgName("threads")->Arg(2);

void BM_ForkJoinFromParked(benchmark::State& state) {
  kiln::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  int64_t n = pool.threads();
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // > the pool's 100 µs of polling
    auto start = std::chrono::steady_clock::now();
    pool.parallelFor(0, n, 1, [](int64_t b, int64_t e) { benchmark::DoNotOptimize(b + e); });
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}
BENCHMARK(BM_ForkJoinFromParked)->ArgName("threads")->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
