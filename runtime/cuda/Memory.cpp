#include "runtime/cuda/Memory.h"

#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace kiln::gpu {

namespace {
std::string humanBytes(size_t bytes) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 6) v /= 1024, ++unit;
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.2f} {}", v, kUnits[unit]);
}
}  // namespace

// ---- DeviceBuffer ----

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      ptr_(std::exchange(other.ptr_, 0)),
      bytes_(std::exchange(other.bytes_, 0)),
      blockBytes_(std::exchange(other.blockBytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
    blockBytes_ = std::exchange(other.blockBytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
  if (owner_ && ptr_) owner_->release(ptr_, blockBytes_);
  owner_ = nullptr;
  ptr_ = 0;
  bytes_ = blockBytes_ = 0;
}

// ---- DeviceAllocator ----

DeviceAllocator::DeviceAllocator(const Stream& stream, std::string device)
    : stream_(stream), device_(std::move(device)) {}

DeviceAllocator::~DeviceAllocator() {
  KILN_ASSERT(stats_.bytesInUse == 0, "{} of device memory still in DeviceBuffers when their allocator ({}) is destroyed",
              humanBytes(stats_.bytesInUse), device_);
  const DriverApi& api = driver();
  api.cuStreamSynchronize(stream_.handle());
  for (auto& [size, blocks] : cache_)
    for (CUdeviceptr p : blocks) api.cuMemFree(p);
}

size_t DeviceAllocator::sizeClass(size_t bytes) {
  if (bytes <= 512) return 512;
  size_t step = std::bit_floor(bytes) / 4;
  return (bytes + step - 1) / step * step;
}

DeviceBuffer DeviceAllocator::allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  KILN_CHECK(bytes <= (size_t(1) << 62), "cannot allocate {} bytes of device memory on {}", bytes, device_);
  KILN_CHECK(!stream_.capturing(),
             "cannot allocate {} bytes of device memory while the stream captures a CUDA graph: allocate "
             "buffers before the capture",
             bytes);
  size_t block = sizeClass(bytes);
  std::lock_guard lock(mutex_);
  auto hit = cache_.find(block);
  CUdeviceptr ptr = 0;
  if (hit != cache_.end() && !hit->second.empty()) {
    ptr = hit->second.back();
    hit->second.pop_back();
    stats_.bytesCached -= block;
    ++stats_.cacheHits;
  } else {
    const DriverApi& api = driver();
    CUresult r = api.cuMemAlloc(&ptr, block);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && stats_.bytesCached > 0) {
      freeCachedLocked();
      r = api.cuMemAlloc(&ptr, block);
    }
    if (r != CUDA_SUCCESS) {
      size_t freeBytes = 0, totalBytes = 0;
      api.cuMemGetInfo(&freeBytes, &totalBytes);
      KILN_THROW("{} on {}: cuMemAlloc({} bytes) failed: {}; asked for {} bytes ({}), {} bytes ({}) free of {}, "
                 "{} in kiln's buffers",
                 r == CUDA_ERROR_OUT_OF_MEMORY ? "out of GPU memory" : "cannot allocate GPU memory", device_, block, errorText(r), bytes, humanBytes(bytes), freeBytes, humanBytes(freeBytes),
                 humanBytes(totalBytes), humanBytes(stats_.bytesInUse));
    }
    ++stats_.deviceAllocations;
  }
  stats_.bytesInUse += block;
  stats_.peakBytesInUse = std::max(stats_.peakBytesInUse, stats_.bytesInUse);
  return DeviceBuffer(this, ptr, bytes, block);
}

void DeviceAllocator::release(CUdeviceptr ptr, size_t blockBytes) {
  std::lock_guard lock(mutex_);
  cache_[blockBytes].push_back(ptr);
  stats_.bytesInUse -= blockBytes;
  stats_.bytesCached += blockBytes;
}

void DeviceAllocator::trim() {
  std::lock_guard lock(mutex_);
  freeCachedLocked();
}

void DeviceAllocator::freeCachedLocked() {
  if (stats_.bytesCached == 0) return;
  const DriverApi& api = driver();
  // Work still queued may use a cached block (its buffer was freed after enqueueing it).
  check(api.cuStreamSynchronize(stream_.handle()), "cuStreamSynchronize");
  for (auto& [size, blocks] : cache_) {
    while (!blocks.empty()) {
      check(api.cuMemFree(blocks.back()), "cuMemFree({} bytes)", size);
      blocks.pop_back();
      stats_.bytesCached -= size;
    }
  }
  cache_.clear();
}

AllocatorStats DeviceAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

// ---- PinnedHostBuffer ----

PinnedHostBuffer::PinnedHostBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  check(driver().cuMemHostAlloc(&data_, bytes, 0), "cuMemHostAlloc({} bytes)", bytes);
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) driver().cuMemFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (data_) driver().cuMemFreeHost(data_);
}

}  // namespace kiln::gpu
