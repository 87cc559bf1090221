#include "runtime/cuda/Context.h"

#include "runtime/cuda/Driver.h"

namespace kiln::gpu {

std::string DeviceProperties::arch() const { return fmt::format("sm_{}{}", ccMajor, ccMinor); }

std::string DeviceProperties::label() const { return fmt::format("device {} ({}, {})", ordinal, name, arch()); }

// ---- Stream ----

Stream::Stream() { check(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }

Stream::~Stream() {
  if (stream_) driver().cuStreamDestroy(stream_);
}

void Stream::upload(CUdeviceptr dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(driver().cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync({} bytes)", bytes);
}

void Stream::download(void* dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return;
  check(driver().cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync({} bytes)", bytes);
}

void Stream::copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return;
  check(driver().cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoDAsync({} bytes)", bytes);
}

void Stream::memset8(CUdeviceptr dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  check(driver().cuMemsetD8Async(dst, value, bytes, stream_), "cuMemsetD8Async({} bytes)", bytes);
}

void Stream::memset32(CUdeviceptr dst, uint32_t value, size_t count) {
  if (count == 0) return;
  check(driver().cuMemsetD32Async(dst, value, count, stream_), "cuMemsetD32Async({} words)", count);
}

void Stream::synchronize() { check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

// ---- Event ----

Event::Event() { check(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate"); }

Event::~Event() {
  if (event_) driver().cuEventDestroy(event_);
}

void Event::record(Stream& stream) { check(driver().cuEventRecord(event_, stream.handle()), "cuEventRecord"); }

void Event::synchronize() { check(driver().cuEventSynchronize(event_), "cuEventSynchronize"); }

float Event::elapsedMs(const Event& start, const Event& end) {
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start.event_, end.event_), "cuEventElapsedTime");
  return ms;
}

// ---- Graph ----

Graph Graph::capture(Stream& stream, const std::function<void()>& record) {
  const DriverApi& api = driver();
  check(api.cuStreamBeginCapture(stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  stream.capturing_ = true;
  CUgraph graph = nullptr;
  try {
    record();
  } catch (...) {
    // End the capture so the stream can be used again; the partial graph is of no use.
    api.cuStreamEndCapture(stream.handle(), &graph);
    stream.capturing_ = false;
    if (graph) api.cuGraphDestroy(graph);
    throw;
  }
  stream.capturing_ = false;
  check(api.cuStreamEndCapture(stream.handle(), &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  if (CUresult r = api.cuGraphInstantiate(&exec, graph, 0); r != CUDA_SUCCESS) {
    api.cuGraphDestroy(graph);
    throwCudaError(r, "cuGraphInstantiate");
  }
  return Graph(graph, exec);
}

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    destroy();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

Graph::~Graph() { destroy(); }

void Graph::destroy() {
  if (!graph_ && !exec_) return;
  const DriverApi& api = driver();
  if (exec_) api.cuGraphExecDestroy(exec_);
  if (graph_) api.cuGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

void Graph::launch(Stream& stream) const {
  KILN_CHECK(exec_, "launching an empty (moved-from) CUDA graph");
  check(driver().cuGraphLaunch(exec_, stream.handle()), "cuGraphLaunch");
}

size_t Graph::nodeCount() const {
  size_t n = 0;
  if (graph_) check(driver().cuGraphGetNodes(graph_, nullptr, &n), "cuGraphGetNodes");
  return n;
}

// ---- Context ----

Context::Context(int ordinal) {
  std::string why;
  if (!available(&why)) KILN_THROW("cannot use CUDA device {}: {}", ordinal, why);
  KILN_CHECK(ordinal >= 0 && ordinal < deviceCount(), "CUDA device {} does not exist: this machine has {} CUDA device{}",
             ordinal, deviceCount(), deviceCount() == 1 ? "" : "s");
  const DriverApi& api = driver();
  check(api.cuDeviceGet(&device_, ordinal), "cuDeviceGet({})", ordinal);

  props_.ordinal = ordinal;
  props_.driverVersion = driverVersion();
  char name[256] = {};
  check(api.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName(device {})", ordinal);
  props_.name = name;
  auto attribute = [&](CUdevice_attribute attr, const char* what) {
    int v = 0;
    check(api.cuDeviceGetAttribute(&v, attr, device_), "cuDeviceGetAttribute({}, device {})", what, ordinal);
    return v;
  };
  props_.ccMajor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  props_.ccMinor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  props_.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  props_.l2CacheBytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size");
  props_.maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
  props_.maxSharedPerBlockOptin =
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block (opt-in)");
  size_t total = 0;
  check(api.cuDeviceTotalMem(&total, device_), "cuDeviceTotalMem(device {})", ordinal);
  props_.totalMemory = total;

  check(api.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain(device {})", ordinal);
  try {
    check(api.cuCtxSetCurrent(context_), "cuCtxSetCurrent(device {})", ordinal);
    stream_ = std::make_unique<Stream>();
    allocator_ = std::make_unique<DeviceAllocator>(*stream_, props_.label());
  } catch (...) {
    stream_.reset();
    api.cuDevicePrimaryCtxRelease(device_);
    throw;
  }
}

Context::~Context() {
  const DriverApi& api = driver();
  api.cuCtxSetCurrent(context_);
  allocator_.reset();
  stream_.reset();
  api.cuDevicePrimaryCtxRelease(device_);
}

void Context::makeCurrent() const { check(driver().cuCtxSetCurrent(context_), "cuCtxSetCurrent({})", props_.label()); }

std::pair<size_t, size_t> Context::memoryInfo() const {
  size_t freeBytes = 0, totalBytes = 0;
  check(driver().cuMemGetInfo(&freeBytes, &totalBytes), "cuMemGetInfo");
  return {freeBytes, totalBytes};
}

}  // namespace kiln::gpu
