// Device memory: RAII buffers from a caching allocator, and pinned host buffers for transfers.
//
// The allocator serves one Context and its one stream. A freed block goes back to a cache and is
// handed out again without synchronising: every use of the old buffer was enqueued on the same
// stream before any use of the new one, so stream order keeps them apart. Buffers that a CUDA
// graph refers to must outlive the graph (the graph replays with the addresses it captured).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::gpu {

class DeviceAllocator;
class Stream;

/// Device memory from a DeviceAllocator; returned to its cache on destruction. Move-only. An empty
/// buffer (zero bytes, or moved from) has ptr() == 0.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  /// The device address as a pointer, for libraries that take `void*` (cuBLASLt).
  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }
  /// Bytes asked for (the block behind it may be larger: its size class).
  size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == 0; }
  /// Returns the block to the allocator now.
  void reset();

 private:
  friend class DeviceAllocator;
  DeviceBuffer(DeviceAllocator* owner, CUdeviceptr ptr, size_t bytes, size_t blockBytes)
      : owner_(owner), ptr_(ptr), bytes_(bytes), blockBytes_(blockBytes) {}

  DeviceAllocator* owner_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  size_t blockBytes_ = 0;
};

/// What the allocator holds, in bytes of whole blocks (size classes, not the sizes asked for).
struct AllocatorStats {
  size_t bytesInUse = 0;         // in live DeviceBuffers
  size_t bytesCached = 0;        // freed, kept for reuse
  size_t peakBytesInUse = 0;     // the most bytesInUse has been
  size_t deviceAllocations = 0;  // cuMemAlloc calls made
  size_t cacheHits = 0;          // allocations served from the cache
};

/// A caching device allocator. Requests are rounded up to a size class — 512 bytes, then four
/// classes per power of two (2^p, 1.25·2^p, 1.5·2^p, 1.75·2^p), so a block wastes under 25% — and a
/// freed block is reused by the next request of its class. When cuMemAlloc runs out of memory, the
/// cache is released and the allocation retried once before the error. Thread-safe. The context
/// must be current on the calling thread when the allocator has to call the driver.
class DeviceAllocator {
 public:
  /// `stream` is the context's stream (allocating is refused while it captures a graph);
  /// `device` names the device in out-of-memory messages.
  DeviceAllocator(const Stream& stream, std::string device);
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  /// Frees the cache. Every DeviceBuffer must be gone by then (asserted).
  ~DeviceAllocator();

  /// A buffer of at least `bytes` (0 gives an empty buffer). Out of memory is a kiln::Error naming
  /// the bytes asked for and the bytes free on the device.
  DeviceBuffer allocate(size_t bytes);
  /// Releases every cached block to the driver (after synchronising the stream).
  void trim();
  AllocatorStats stats() const;

  /// The block size a request of `bytes` gets.
  static size_t sizeClass(size_t bytes);

 private:
  friend class DeviceBuffer;
  void release(CUdeviceptr ptr, size_t blockBytes);
  void freeCachedLocked();

  const Stream& stream_;
  std::string device_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<CUdeviceptr>> cache_;  // size class → free blocks
  AllocatorStats stats_;
};

/// Page-locked host memory (cuMemHostAlloc): copies from and to it run asynchronously at full
/// speed. Needs the context current when created and destroyed, and must not outlive it.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  explicit PinnedHostBuffer(size_t bytes);
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kiln::gpu
