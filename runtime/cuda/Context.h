// A CUDA device as kiln uses it: the device's primary context, current on the thread that made
// it; one stream where all work goes (copies, memsets, kernels, cuBLASLt, graph launches); the
// caching allocator; events for timing; and CUDA graphs captured from the stream.
//
// The primary context is the one the CUDA runtime (and so cuBLASLt) uses, so the driver-API work
// here and the libraries share memory and streams. Calls that reach the driver need the context
// current on the calling thread: the constructor makes it current on its thread; another thread
// calls makeCurrent() first. Objects made from a Context (buffers, modules, graphs, BlasLt) must be
// destroyed before it.
#pragma once

#include "runtime/cuda/Memory.h"

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace kiln::gpu {

/// What kiln needs to know about a device.
struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0, ccMinor = 0;     // compute capability
  int multiprocessors = 0;
  uint64_t totalMemory = 0;         // bytes
  int l2CacheBytes = 0;
  int maxThreadsPerBlock = 0;
  int maxSharedPerBlockOptin = 0;   // bytes of shared memory a block may opt in to
  int driverVersion = 0;            // e.g. 13000

  /// The real architecture to compile for, e.g. "sm_90".
  std::string arch() const;
  /// "device 0 (NVIDIA H100 80GB HBM3, sm_90)".
  std::string label() const;
};

/// A CUDA stream (non-blocking: it never waits for the legacy default stream). Enqueued work runs
/// in order; host-side calls return before it finishes unless they say otherwise.
class Stream {
 public:
  /// Creates a stream in the context current on this thread.
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  CUstream handle() const { return stream_; }
  /// True between the start and the end of Graph::capture on this stream.
  bool capturing() const { return capturing_; }

  /// Host → device copy. From pageable memory the driver stages the data before returning, so
  /// `src` may be reused at once; from a PinnedHostBuffer the copy is truly asynchronous and `src`
  /// must stay untouched until the stream gets there.
  void upload(CUdeviceptr dst, const void* src, size_t bytes);
  /// Device → host copy. Read `dst` only after synchronize().
  void download(void* dst, CUdeviceptr src, size_t bytes);
  /// Device → device copy.
  void copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  /// Sets `bytes` bytes to `value`.
  void memset8(CUdeviceptr dst, uint8_t value, size_t bytes);
  /// Sets `count` 32-bit words to `value` (dst 4-byte aligned).
  void memset32(CUdeviceptr dst, uint32_t value, size_t count);
  /// Waits for all work enqueued so far; a failure of that work (a kernel fault) is reported here.
  void synchronize();

 private:
  friend class Graph;
  CUstream stream_ = nullptr;
  bool capturing_ = false;
};

/// A CUDA event, for timing work on a stream.
class Event {
 public:
  Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  /// Records the event at the current end of the stream's work.
  void record(Stream& stream);
  /// Waits until the recorded point is reached.
  void synchronize();
  /// Milliseconds between two recorded (and reached) events.
  static float elapsedMs(const Event& start, const Event& end);

 private:
  CUevent event_ = nullptr;
};

/// An instantiated CUDA graph: a recorded sequence of stream work replayed with one launch.
class Graph {
 public:
  /// Captures the work `record` enqueues on `stream` — it runs nothing on the device — and
  /// instantiates it. The capture is thread-local (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL): this
  /// thread may make no call that is unsafe during a capture (cuMemAlloc, a synchronisation), and
  /// the allocator refuses to allocate; other threads are unaffected. If `record` throws, the
  /// capture is ended and the exception passed on, leaving the stream usable.
  static Graph capture(Stream& stream, const std::function<void()>& record);

  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  /// Enqueues one replay on `stream`.
  void launch(Stream& stream) const;
  /// Nodes in the captured graph (kernels, copies, memsets…).
  size_t nodeCount() const;

 private:
  Graph(CUgraph graph, CUgraphExec exec) : graph_(graph), exec_(exec) {}
  void destroy();

  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

/// A device in use: its primary context, properties, stream and allocator. Not copyable or
/// movable (its allocator and buffers refer to it).
class Context {
 public:
  /// Retains the primary context of device `ordinal` and makes it current on this thread. Throws
  /// kiln::Error containing "no CUDA device" when there is no driver or device, or naming the
  /// ordinal when it does not exist.
  explicit Context(int ordinal = 0);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  /// Makes this context current on the calling thread.
  void makeCurrent() const;
  const DeviceProperties& properties() const { return props_; }
  Stream& stream() { return *stream_; }
  DeviceAllocator& allocator() { return *allocator_; }
  /// Shorthand for allocator().allocate(bytes).
  DeviceBuffer allocate(size_t bytes) { return allocator_->allocate(bytes); }
  /// Free and total device memory in bytes (cuMemGetInfo), as the driver sees it now.
  std::pair<size_t, size_t> memoryInfo() const;
  /// Waits for the stream's work.
  void synchronize() { stream_->synchronize(); }

 private:
  DeviceProperties props_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  // Destroyed in reverse: the allocator (it synchronises the stream) before the stream.
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<DeviceAllocator> allocator_;
};

}  // namespace kiln::gpu
