// A persistent thread pool for CPU kernels: threads are started once and parked between jobs, so
// a training step of many kernels creates no threads. A job is a parallel for over [begin, end),
// split statically into at most `threads()` contiguous chunks; the calling thread runs one chunk
// itself, then any chunk no worker has started yet. Generated code reaches the pool through the C
// entry point `kiln_parallel_for`.
//
// Scheduling rules (see docs/ARCHITECTURE.md, "Thread pool"):
// - A range shorter than 2 * grain runs inline on the caller: small kernels stay single-threaded,
//   decided by their size.
// - A parallelFor issued from inside a chunk (nested) runs inline on the thread that issued it.
// - A parallelFor issued while the pool serves another thread's job runs inline as well: the
//   pool's threads are busy, so the caller's own core is the best it can get, and nobody blocks.
// - A job that asks for awake workers only (a negative grain through kiln_parallel_for, or
//   runAwake) runs inline while one of its workers is parked: a short job (a batch-1 layer of a
//   few microseconds) would wait longer for the wake-up system call than its work takes. Such a
//   job wakes the parked workers (and still runs inline) only when it follows the pool's last one
//   of its kind within the workers' polling time: a stream of calls, which then gets the threads.
// - An exception thrown by a chunk is caught wherever it ran; once every chunk has finished, the
//   first one caught is rethrown on the caller. The pool stays usable.
// - Every chunk runs in the caller's floating-point mode (x86's MXCSR: rounding, and whether
//   subnormals are flushed; support/FloatMode.h): a worker takes it on before its chunk.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln::rt {

class ThreadPool {
 public:
  /// The work of one chunk, as generated code passes it: `fn(ctx, b, e)` handles [b, e).
  using ChunkFn = void (*)(void* ctx, int64_t b, int64_t e);

  /// A pool of `threads` participants, the caller included: threads - 1 workers are started now.
  /// 0 means one per hardware thread; 1 starts no thread and runs everything on the caller.
  /// Throws kiln::Error for a negative count.
  explicit ThreadPool(int threads);
  /// Wakes the workers and joins them. Must not run while a job is in flight.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// The number of participants in a job: the workers plus the caller.
  int threads() const { return threads_; }

  /// The process-wide pool, created on first use with threadsFromEnvironment() threads.
  static ThreadPool& global();
  /// The thread count KILN_THREADS asks for: 0 (one per hardware thread) when unset or empty.
  /// Throws kiln::Error when it is not a non-negative integer.
  static int threadsFromEnvironment();
  /// The most threads KILN_THREADS may ask for (a pool of 100000 took seconds to fail).
  static constexpr int kMaxThreads = 1024;

  /// Calls fn(b, e) on disjoint chunks [b, e) covering [begin, end) exactly once, and returns
  /// when all have run; an empty range calls nothing. With g = max(grain, 1) and size = end - begin,
  /// there is one chunk when size < 2 * g, else n = min(threads(), size / g) chunks, in order, the
  /// first size % n of them one iteration longer. The partition depends only on these numbers, so
  /// per-chunk partial results (reductions) are reproducible for a given thread count.
  template <typename F>
  void parallelFor(int64_t begin, int64_t end, int64_t grain, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run(begin, end, grain, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
        const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
  }

  /// parallelFor with the chunk given as a C function and its context.
  void run(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx) {
    runJob(begin, end, grain, fn, ctx, false);
  }
  /// run(), on workers already awake only: while any worker the job would use is parked, the
  /// caller runs all of [begin, end) itself (see the scheduling rules above). The partition into
  /// chunks is run()'s whenever the job is split.
  void runAwake(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx) {
    runJob(begin, end, grain, fn, ctx, true);
  }

  /// How many workers sleep on their futex now (parked after polling idle): a snapshot, for tests
  /// and diagnostics.
  int parkedWorkers() const;

  /// memcpy(dst, src, bytes) for copies too big for one thread to stream at memory speed (a batch
  /// staged for the GPU): from kParallelCopyBytes on, the pool's threads copy runs of whole 4 KiB
  /// steps from the start, at least kCopyGrainBytes each; below, the caller copies alone.
  void copy(void* dst, const void* src, size_t bytes);
  static constexpr size_t kCopyGrainBytes = size_t(1) << 20;
  static constexpr size_t kParallelCopyBytes = 2 * kCopyGrainBytes;

 private:
  // One per worker, on its own cache line: the caller bumps `seq` to hand the worker a job, so
  // each worker wakes only for jobs that have a chunk for it.
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};
    std::atomic<bool> sleeping{false};
    // The worker's chunk: 2·job while job `job` has left it unclaimed, 2·job + 1 once a thread has
    // taken it (job 0's, taken, at first). The worker takes its own; the caller, after its chunk,
    // takes whatever is still unclaimed, so it never waits for a worker that has not started
    // (asleep, or its vCPU descheduled), and a worker that wakes after its job has ended finds
    // nothing to take and never reads that job's fields.
    std::atomic<uint64_t> chunk{1};
  };

  void runJob(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx, bool awakeOnly);
  /// For runAwake while the pool is ours (busy_): whether the workers of a job of `chunks`
  /// chunks all poll; if not, wakes the parked ones when the last awake-only job was recent.
  bool workersAwake(int chunks);
  void workerLoop(int index);
  /// Takes worker `index`'s chunk of job `job` when nobody has: true when this thread is to run it.
  bool claim(int index, uint64_t job);
  /// Runs a claimed chunk and counts it done; the caller may return once `pending_` is 0.
  void runChunk(int index) noexcept;
  void wake(int worker);  // hands worker `worker` (1-based) the current job, or the stop request
  void stop();

  const int threads_;
  std::unique_ptr<Slot[]> slots_;  // slots_[k - 1] belongs to worker k; the caller is participant 0
  std::atomic<uint64_t> current_{0};  // the count of jobs handed to the workers: the one in flight
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};  // a job is in flight
  std::atomic<bool> stopping_{false};
  // When the last awake-only job and the last wake-up it made began (workersAwake; only the
  // thread holding busy_ touches them).
  std::chrono::steady_clock::time_point lastAwakeJob_{}, lastRouse_{};

  // The job in flight: written by the caller before it arms the chunks, read-only until every
  // chunk has been counted done in `pending_`; a thread reads them only once it holds a chunk.
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t begin_ = 0;
  uint64_t size_ = 0;
  int chunks_ = 0;
  uint32_t control_ = 0;  // the caller's floating-point control (support/FloatMode.h), for every chunk

  alignas(64) std::atomic<uint32_t> pending_{0};  // chunks of the job not yet done
  std::atomic<bool> callerSleeping_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // the first exception caught, written by whoever set failed_
};

}  // namespace kiln::rt

/// The pool for generated code: ThreadPool::run on `pool` (a kiln::rt::ThreadPool*, or null for
/// ThreadPool::global()); a negative grain -g asks for ThreadPool::runAwake with grain g. An
/// exception thrown by fn propagates as from ThreadPool::run; the chunks of generated code never
/// throw.
extern "C" void kiln_parallel_for(void* pool, int64_t begin, int64_t end, int64_t grain,
                                  void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx);
