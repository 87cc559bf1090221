// The thread pool's fork/join cost: an empty parallelFor split into one chunk per thread, back to
// back (the worker still polling, as between the kernels of a step) and after a pause long enough
// for the worker to park on its futex (the first kernel of a step). threads = 1 is the inline
// baseline. And ThreadPool::copy's bandwidth on a GPU batch's size. See docs/ARCHITECTURE.md,
// "Thread pool".
#include "runtime/ThreadPool.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

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
// A fixed count of iterations: the caller takes the parked worker's chunk, so an iteration measures
// a few microseconds (the wake-up system call), and a time-based count would sleep for hours.
BENCHMARK(BM_ForkJoinFromParked)
    ->ArgName("threads")
    ->Arg(2)
    ->UseManualTime()
    ->Iterations(2000)
    ->Unit(benchmark::kMicrosecond);

// ThreadPool::copy of a GPU batch's size (simplenet's 40 MB f32 input) into memory that was
// written before, as a pinned staging buffer is: bytes per second on 1 and 2 threads.
void BM_Copy(benchmark::State& state) {
  kiln::rt::ThreadPool pool(static_cast<int>(state.range(0)));
  const size_t bytes = static_cast<size_t>(state.range(1)) << 20;
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{2});
  for (auto _ : state) {
    pool.copy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Copy)->ArgNames({"threads", "MiB"})->Args({1, 40})->Args({2, 40})->Args({1, 4})->Args({2, 4})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
