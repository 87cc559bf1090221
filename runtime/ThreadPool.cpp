#include "runtime/ThreadPool.h"

#include "support/Error.h"
#include "support/FloatMode.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#ifdef __linux__
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln::rt {
namespace {

// Set on the pool's workers, and on a caller while it runs its own chunk: a parallelFor issued
// there is nested and runs inline, since the pool's threads are already taken by the outer job.
thread_local bool tInsideJob = false;

// How a thread waits for the pool (a worker for its next job, the caller for the last chunk): it
// spins briefly with `pause`, then polls between sched_yield calls until kPoll has passed, then
// sleeps on a futex. The kernels of a step follow each other within microseconds, while waking a
// sleeping thread costs tens of microseconds (more on a virtual machine), so threads that poll
// stay hot through a step. Yielding while polling hands the core to any other runnable thread:
// on an oversubscribed machine, that is often the very thread being waited for.
constexpr int kPauseSpins = 64;
constexpr auto kPoll = std::chrono::microseconds(100);

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Sleeps while `word` still holds `expected` (it may also return spuriously).
void futexWait(std::atomic<uint32_t>& word, uint32_t expected) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word.wait(expected, std::memory_order_seq_cst);
#endif
}

// Wakes the one thread that may sleep on `word`.
void futexWake(std::atomic<uint32_t>& word) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
  word.notify_one();
#endif
}

// Waits until done(word) holds: spins, polls, then sleeps (see kPoll). `sleeping` is raised
// while this thread may sleep, so that the writer of `word` makes the wake-up system call only
// then; both sides use seq_cst, so either the writer sees the flag or this thread sees the new
// value before it sleeps.
template <typename Done>
uint32_t await(std::atomic<uint32_t>& word, std::atomic<bool>& sleeping, Done done) {
  for (int i = 0; i < kPauseSpins; ++i) {
    if (uint32_t v = word.load(std::memory_order_acquire); done(v)) return v;
    cpuRelax();
  }
  auto deadline = std::chrono::steady_clock::now() + kPoll;
  do {
    if (uint32_t v = word.load(std::memory_order_acquire); done(v)) return v;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  for (;;) {
    sleeping.store(true, std::memory_order_seq_cst);
    uint32_t v = word.load(std::memory_order_seq_cst);
    if (done(v)) {
      sleeping.store(false, std::memory_order_relaxed);
      return v;
    }
    futexWait(word, v);
  }
}

// Wakes the thread awaiting `word` if it may be asleep; called right after a seq_cst write to word.
void signal(std::atomic<uint32_t>& word, std::atomic<bool>& sleeping) {
  if (sleeping.load(std::memory_order_seq_cst)) futexWake(word);
}

}  // namespace

ThreadPool::ThreadPool(int threads)
    : threads_(threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  KILN_CHECK(threads >= 0, "a thread pool needs a non-negative thread count, got {}", threads);
  if (threads_ == 1) return;
  slots_ = std::make_unique<Slot[]>(threads_ - 1);
  workers_.reserve(threads_ - 1);
  try {
    for (int k = 1; k < threads_; ++k) {
      workers_.emplace_back([this, k] { workerLoop(k); });
#ifdef __linux__
      // Named here rather than by the worker, so the name is in place when the constructor returns.
      // Thread names hold at most 15 characters.
      std::string name = fmt::format("kiln-pool-{}", k).substr(0, 15);
      pthread_setname_np(workers_.back().native_handle(), name.c_str());
#endif
    }
  } catch (const std::system_error& e) {
    const size_t failing = workers_.size() + 1;  // worker k (the caller's thread is the pool's 0)
    stop();
    KILN_THROW("could not start thread {} of a pool of {}: {}", failing, threads_, e.what());
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  stopping_.store(true, std::memory_order_relaxed);  // published by the seq bump in wake()
  for (int k = 1; k <= static_cast<int>(workers_.size()); ++k) wake(k);
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

int ThreadPool::threadsFromEnvironment() {
  const char* text = std::getenv("KILN_THREADS");
  if (!text || !*text) return 0;
  std::string_view s(text);
  int n = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  KILN_CHECK(ec == std::errc() && end == s.data() + s.size() && n >= 0,
             "KILN_THREADS='{}' is not a thread count: expected a non-negative integer (0: one per hardware thread)",
             s);
  KILN_CHECK(n <= kMaxThreads, "KILN_THREADS={} is more threads than a pool takes (at most {})", n, kMaxThreads);
  return n;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(threadsFromEnvironment());
  return pool;
}

void ThreadPool::wake(int worker) {
  Slot& slot = slots_[worker - 1];
  slot.seq.fetch_add(1, std::memory_order_seq_cst);
  signal(slot.seq, slot.sleeping);
}

int ThreadPool::parkedWorkers() const {
  int n = 0;
  for (int k = 1; k < threads_; ++k) n += slots_[k - 1].sleeping.load(std::memory_order_seq_cst);
  return n;
}

bool ThreadPool::workersAwake(int chunks) {
  bool parked = false;
  for (int k = 1; k < chunks; ++k) parked = parked || slots_[k - 1].sleeping.load(std::memory_order_seq_cst);
  const auto now = std::chrono::steady_clock::now();
  const bool stream = now - lastAwakeJob_ < kPoll;
  lastAwakeJob_ = now;
  // A stream of calls: wake the parked workers for the calls to come (each finds no chunk of its
  // own in the job in flight, and polls), at most once per polling time while they take to run.
  if (parked && stream && now - lastRouse_ >= kPoll) {
    lastRouse_ = now;
    for (int k = 1; k < chunks; ++k)
      if (slots_[k - 1].sleeping.load(std::memory_order_seq_cst)) wake(k);
  }
  return !parked;
}

void ThreadPool::runJob(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx, bool awakeOnly) {
  if (end <= begin) return;
  // Unsigned, so that any begin < end has a size, even [INT64_MIN, INT64_MAX).
  uint64_t size = static_cast<uint64_t>(end) - static_cast<uint64_t>(begin);
  uint64_t chunks = std::min<uint64_t>(threads_, size / static_cast<uint64_t>(std::max<int64_t>(grain, 1)));
  if (chunks < 2 || tInsideJob || busy_.exchange(true, std::memory_order_acquire)) {
    fn(ctx, begin, end);
    return;
  }
  if (awakeOnly && !workersAwake(static_cast<int>(chunks))) {
    busy_.store(false, std::memory_order_release);
    fn(ctx, begin, end);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  begin_ = begin;
  size_ = size;
  chunks_ = static_cast<int>(chunks);
  control_ = floatControl();
  pending_.store(chunks_, std::memory_order_relaxed);
  // Arm the workers' chunks (each store releases the fields above to whoever claims it).
  const uint64_t job = current_.load(std::memory_order_relaxed) + 1;
  for (int k = 1; k < chunks_; ++k) slots_[k - 1].chunk.store(2 * job, std::memory_order_release);
  current_.store(job, std::memory_order_release);
  for (int k = 1; k < chunks_; ++k) wake(k);

  tInsideJob = true;
  runChunk(0);
  // Then whatever no worker has taken yet, from the last: a worker still asleep, or not yet
  // scheduled, costs this thread the chunk's work instead of the worker's wake-up.
  for (int k = chunks_ - 1; k >= 1; --k)
    if (claim(k, job)) runChunk(k);
  tInsideJob = false;
  await(pending_, callerSleeping_, [](uint32_t left) { return left == 0; });

  std::exception_ptr error = std::exchange(error_, nullptr);
  failed_.store(false, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

void ThreadPool::copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPage = 4096;
  if (bytes < kParallelCopyBytes || threads_ == 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  const auto pages = static_cast<int64_t>((bytes + kPage - 1) / kPage);
  parallelFor(0, pages, static_cast<int64_t>(kCopyGrainBytes / kPage), [&](int64_t b, int64_t e) {
    const size_t from = static_cast<size_t>(b) * kPage, to = std::min(static_cast<size_t>(e) * kPage, bytes);
    std::memcpy(static_cast<std::byte*>(dst) + from, static_cast<const std::byte*>(src) + from, to - from);
  });
}

void ThreadPool::runChunk(int index) noexcept {
  // Chunk sizes differ by at most one: the first size % chunks chunks take one more iteration.
  uint64_t base = size_ / chunks_, extra = size_ % chunks_, i = index;
  uint64_t offset = i * base + std::min(i, extra);
  uint64_t length = base + (i < extra ? 1 : 0);
  int64_t b = static_cast<int64_t>(static_cast<uint64_t>(begin_) + offset);
  int64_t e = static_cast<int64_t>(static_cast<uint64_t>(b) + length);
  try {
    fn_(ctx_, b, e);
  } catch (...) {
    if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
  }
  // The caller may return as soon as pending_ reaches 0; the pool outlives a worker's signal
  // because its destructor joins the worker first.
  if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1) signal(pending_, callerSleeping_);
}

bool ThreadPool::claim(int index, uint64_t job) {
  uint64_t armed = 2 * job;
  return slots_[index - 1].chunk.compare_exchange_strong(armed, armed + 1, std::memory_order_acquire,
                                                         std::memory_order_relaxed);
}

void ThreadPool::workerLoop(int index) {
  tInsideJob = true;
  Slot& slot = slots_[index - 1];
  uint32_t seen = 0;
  for (;;) {
    seen = await(slot.seq, slot.sleeping, [seen](uint32_t seq) { return seq != seen; });
    if (stopping_.load(std::memory_order_relaxed)) return;
    // The job in flight now, which may be a later one than the wake-up was for; its chunk
    // `index`, unless the caller has taken it (or the job has none).
    if (!claim(index, current_.load(std::memory_order_acquire))) continue;
    setFloatMode(control_);
    runChunk(index);
  }
}

}  // namespace kiln::rt

extern "C" void kiln_parallel_for(void* pool, int64_t begin, int64_t end, int64_t grain,
                                  void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx) {
  auto* p = pool ? static_cast<kiln::rt::ThreadPool*>(pool) : &kiln::rt::ThreadPool::global();
  if (grain < 0)
    p->runAwake(begin, end, grain == INT64_MIN ? INT64_MAX : -grain, fn, ctx);
  else
    p->run(begin, end, grain, fn, ctx);
}
