// The CUDA runtime on a real device (label gpu; each test skips without one): copies of awkward
// sizes, the caching allocator, out-of-memory messages, NVRTC-built modules, dynamic shared memory
// beyond 48 KiB, CUDA graphs, events, and cuBLASLt products in every transposition, batched, in
// f32/bf16/f16, with each fused epilogue, against host references computed in double.
#include "codegen/cuda/Nvrtc.h"
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"
#include "runtime/cuda/Module.h"
#include "support/DType.h"
#include "support/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln::gpu {
namespace {

using ::testing::HasSubstr;

const char* kKernels = R"(
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
// One block reverses n floats through dynamic shared memory.
extern "C" __global__ void reverse(int n, const float* in, float* out) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
)";

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!available(&why)) GTEST_SKIP() << "skipped: " << why;
    ctx = std::make_unique<Context>(0);
  }

  DeviceBuffer upload(const std::vector<float>& v) {
    DeviceBuffer b = ctx->allocate(v.size() * sizeof(float));
    ctx->stream().upload(b.ptr(), v.data(), v.size() * sizeof(float));
    return b;
  }
  std::vector<float> download(const DeviceBuffer& b, size_t count) {
    std::vector<float> v(count);
    ctx->stream().download(v.data(), b.ptr(), count * sizeof(float));
    ctx->synchronize();
    return v;
  }
  Module kernels() {
    auto compiled = cuda::compileCuda(kKernels, "runtime_test.cu", ctx->properties().arch());
    return Module(*ctx, compiled.cubin, "runtime_test.cu");
  }

  std::unique_ptr<Context> ctx;
};

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST_F(CudaRuntime, ReportsDeviceProperties) {
  const DeviceProperties& p = ctx->properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.ccMajor, 5);
  EXPECT_EQ(p.arch(), "sm_" + std::to_string(p.ccMajor) + std::to_string(p.ccMinor));
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GT(p.totalMemory, 0u);
  EXPECT_GT(p.l2CacheBytes, 0);
  EXPECT_GE(p.maxSharedPerBlockOptin, 48 * 1024);
  EXPECT_GE(p.driverVersion, 13000);
  auto [freeBytes, totalBytes] = ctx->memoryInfo();
  EXPECT_GT(freeBytes, 0u);
  EXPECT_LE(freeBytes, totalBytes);
  std::printf("%s: %d SMs, %.1f GiB, L2 %d KiB, driver %d\n", p.label().c_str(), p.multiprocessors,
              p.totalMemory / 1073741824.0, p.l2CacheBytes / 1024, p.driverVersion);
}

TEST_F(CudaRuntime, CopiesRoundTripAtOddSizes) {
  Stream& s = ctx->stream();
  for (size_t bytes : {size_t(1), size_t(7), size_t(33), size_t(1000), size_t(65537), size_t(3 << 20) + 5}) {
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> host(bytes), back(bytes, 0), viaPinned(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<uint8_t>(i * 131 + 7);
    DeviceBuffer a = ctx->allocate(bytes), b = ctx->allocate(bytes);
    EXPECT_EQ(a.bytes(), bytes);
    s.upload(a.ptr(), host.data(), bytes);
    s.copy(b.ptr(), a.ptr(), bytes);
    s.download(back.data(), b.ptr(), bytes);
    // Through pinned buffers: both directions asynchronous.
    PinnedHostBuffer in(bytes), out(bytes);
    std::memcpy(in.data(), host.data(), bytes);
    s.memset8(a.ptr(), 0, bytes);
    s.upload(a.ptr(), in.data(), bytes);
    s.download(out.data(), a.ptr(), bytes);
    s.synchronize();
    std::memcpy(viaPinned.data(), out.data(), bytes);
    EXPECT_EQ(back, host);
    EXPECT_EQ(viaPinned, host);
    // memset8 over the odd length, then memset32 over the whole words.
    s.memset8(b.ptr(), 0xab, bytes);
    s.memset32(b.ptr(), 0x01020304u, bytes / 4);
    s.download(back.data(), b.ptr(), bytes);
    s.synchronize();
    for (size_t i = 0; i < bytes; ++i) {
      uint8_t want = i < bytes / 4 * 4 ? static_cast<uint8_t>(0x04 - i % 4) : 0xab;  // little-endian words
      ASSERT_EQ(back[i], want) << "byte " << i;
    }
  }
}

TEST_F(CudaRuntime, AllocatorReusesFreedBlocks) {
  DeviceAllocator& alloc = ctx->allocator();
  EXPECT_EQ(DeviceAllocator::sizeClass(1000), 1024u);
  const AllocatorStats before = alloc.stats();
  CUdeviceptr first = 0;
  {
    DeviceBuffer a = ctx->allocate(1000);
    first = a.ptr();
    EXPECT_NE(first, 0u);
    EXPECT_EQ(alloc.stats().bytesInUse, before.bytesInUse + 1024);
  }
  AllocatorStats freed = alloc.stats();
  EXPECT_EQ(freed.bytesInUse, before.bytesInUse);
  EXPECT_EQ(freed.bytesCached, before.bytesCached + 1024);
  DeviceBuffer b = ctx->allocate(900);  // same size class
  EXPECT_EQ(b.ptr(), first);
  AllocatorStats reused = alloc.stats();
  EXPECT_EQ(reused.cacheHits, before.cacheHits + 1);
  EXPECT_EQ(reused.deviceAllocations, before.deviceAllocations + 1);
  EXPECT_EQ(reused.bytesCached, before.bytesCached);
  DeviceBuffer c = ctx->allocate(1000);  // the cache is empty again: a new block
  EXPECT_NE(c.ptr(), first);
  EXPECT_EQ(alloc.stats().deviceAllocations, before.deviceAllocations + 2);
  EXPECT_GE(alloc.stats().peakBytesInUse, before.bytesInUse + 2048);
  b.reset();
  c.reset();
  EXPECT_EQ(alloc.stats().bytesCached, before.bytesCached + 2048);
  alloc.trim();
  EXPECT_EQ(alloc.stats().bytesCached, 0u);
  EXPECT_TRUE(ctx->allocate(0).empty());
}

TEST_F(CudaRuntime, OutOfMemorySaysHowMuchWasAskedAndIsFree) {
  const size_t petabyte = size_t(1) << 50;
  try {
    DeviceBuffer huge = ctx->allocate(petabyte);
    FAIL() << "allocated 1 PiB";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out of GPU memory"));
    EXPECT_THAT(e.what(), HasSubstr("1125899906842624 bytes (1.00 PiB)"));
    EXPECT_THAT(e.what(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
    EXPECT_THAT(e.what(), HasSubstr("free of"));
    EXPECT_THAT(e.what(), HasSubstr(ctx->properties().name));
  }
  DeviceBuffer small = ctx->allocate(64);  // still usable
  EXPECT_FALSE(small.empty());
}

TEST_F(CudaRuntime, LaunchesAnNvrtcKernelFromCubinAndPtx) {
  auto compiled = cuda::compileCuda(kKernels, "runtime_test.cu", ctx->properties().arch());
  Module fromCubin(*ctx, compiled.cubin, "runtime_test.cu");
  Module fromPtx(*ctx, compiled.ptx, "runtime_test.ptx");
  const int n = 1000;
  const float a = 2.5f;
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2);
  for (Module* m : {&fromCubin, &fromPtx}) {
    DeviceBuffer dx = upload(x), dy = upload(y);
    Kernel saxpy = m->kernel("saxpy");
    saxpy.launchWith(ctx->stream(), Dim3{(n + 127) / 128}, Dim3{128}, 0, n, a, dx.ptr(), dy.ptr());
    std::vector<float> got = download(dy, n);
    for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], a * x[i] + y[i], 1e-5) << i;
  }
  EXPECT_THROW(fromCubin.kernel("no_such_kernel"), Error);
}

TEST_F(CudaRuntime, DynamicSharedMemoryBeyond48KiB) {
  const int n = 25 * 1024;  // 100 KiB of floats
  const unsigned shared = n * sizeof(float);
  if (ctx->properties().maxSharedPerBlockOptin < static_cast<int>(shared))
    GTEST_SKIP() << ctx->properties().label() << " offers only " << ctx->properties().maxSharedPerBlockOptin
                 << " bytes of shared memory per block";
  Module m = kernels();
  Kernel reverse = m.kernel("reverse");
  std::vector<float> x = randomFloats(n, 3);
  DeviceBuffer in = upload(x), out = ctx->allocate(n * sizeof(float));
  reverse.launchWith(ctx->stream(), Dim3{1}, Dim3{256}, shared, n, in.ptr(), out.ptr());
  std::vector<float> got = download(out, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], x[n - 1 - i]) << i;
  EXPECT_THROW(reverse.launchWith(ctx->stream(), Dim3{1}, Dim3{256}, 1u << 30, n, in.ptr(), out.ptr()), Error);
}

TEST_F(CudaRuntime, CapturedGraphReplays) {
  Module m = kernels();
  Kernel saxpy = m.kernel("saxpy");
  const int n = 777;
  const float a = 0.75f;
  std::vector<float> x = randomFloats(n, 4), y = randomFloats(n, 5);
  DeviceBuffer dx = upload(x), dy = upload(y);
  ctx->synchronize();
  Stream& s = ctx->stream();
  Graph graph = Graph::capture(s, [&] {
    saxpy.launchWith(s, Dim3{(n + 255) / 256}, Dim3{256}, 0, n, a, dx.ptr(), dy.ptr());
  });
  EXPECT_EQ(graph.nodeCount(), 1u);
  // Capturing ran nothing.
  EXPECT_EQ(download(dy, n), y);
  for (int r = 0; r < 3; ++r) graph.launch(s);
  std::vector<float> got = download(dy, n);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], y[i] + 3.0 * a * x[i], 1e-5) << i;

  // Allocating inside a capture is refused, and the stream stays usable.
  try {
    Graph::capture(s, [&] { ctx->allocate(16); });
    FAIL() << "allocated during a capture";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("captures a CUDA graph"));
  }
  EXPECT_FALSE(s.capturing());
  EXPECT_EQ(download(dy, n), got);
}

TEST_F(CudaRuntime, EventsTimeStreamWork) {
  Module m = kernels();
  Kernel saxpy = m.kernel("saxpy");
  const int n = 1 << 20;
  DeviceBuffer dx = ctx->allocate(n * sizeof(float)), dy = ctx->allocate(n * sizeof(float));
  ctx->stream().memset8(dx.ptr(), 0, n * sizeof(float));
  ctx->stream().memset8(dy.ptr(), 0, n * sizeof(float));
  Event start, end;
  start.record(ctx->stream());
  saxpy.launchWith(ctx->stream(), Dim3{n / 256}, Dim3{256}, 0, n, 1.0f, dx.ptr(), dy.ptr());
  end.record(ctx->stream());
  end.synchronize();
  float ms = Event::elapsedMs(start, end);
  EXPECT_GE(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
}

// ---- cuBLASLt ----

double gelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double geluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

float roundTo(DType t, float v) {
  switch (t) {
    case DType::f16: return halfToFloat(floatToHalf(v));
    case DType::bf16: return bfloat16ToFloat(floatToBFloat16(v));
    default: return v;
  }
}

std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * dtypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&bytes[i * 4], &v[i], 4);
    } else {
      uint16_t h = t == DType::f16 ? floatToHalf(v[i]) : floatToBFloat16(v[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(DType t, const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / dtypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&v[i], &bytes[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      v[i] = t == DType::f16 ? halfToFloat(h) : bfloat16ToFloat(h);
    }
  }
  return v;
}

class CudaBlasLt : public CudaRuntime {
 protected:
  void SetUp() override {
    CudaRuntime::SetUp();
    if (IsSkipped()) return;
    std::string why;
    if (!BlasLt::available(&why)) GTEST_SKIP() << "skipped: " << why;
    lt = std::make_unique<BlasLt>(*ctx);
  }
  void TearDown() override { lt.reset(); }

  DeviceBuffer put(DType t, const std::vector<float>& v) {
    std::vector<uint8_t> bytes = encode(t, v);
    DeviceBuffer b = ctx->allocate(bytes.size());
    ctx->stream().upload(b.ptr(), bytes.data(), bytes.size());
    return b;
  }
  std::vector<float> get(DType t, const DeviceBuffer& b, size_t count) {
    std::vector<uint8_t> bytes(count * dtypeSize(t));
    ctx->stream().download(bytes.data(), b.ptr(), bytes.size());
    ctx->synchronize();
    return decode(t, bytes);
  }

  // Runs `d` on random inputs (exact in the input type) and checks D — and the bias gradient — against
  // a double-precision host reference: |error| <= tol · (Σ|a·b| + |bias| + |beta·c|) + 1e-6.
  void check(const MatmulDesc& d, double tol, unsigned seed = 7);

  std::unique_ptr<BlasLt> lt;
};

void CudaBlasLt::check(const MatmulDesc& d, double tol, unsigned seed) {
  SCOPED_TRACE(d.str());
  const int64_t batch = d.batch;
  const int64_t sA = batch > 1 ? d.strideA : 0, sB = batch > 1 ? d.strideB : 0, sD = batch > 1 ? d.strideD : 0;
  const size_t nA = (batch - 1) * sA + d.m * d.k, nB = (batch - 1) * sB + d.k * d.n, nD = (batch - 1) * sD + d.m * d.n;
  const bool forwardBias = d.epilogue == Epilogue::bias || d.epilogue == Epilogue::biasRelu ||
                           d.epilogue == Epilogue::biasGelu;
  const bool biasGrad = d.epilogue == Epilogue::biasGradA || d.epilogue == Epilogue::biasGradB;
  const int64_t biasLen = d.epilogue == Epilogue::biasGradA ? d.m : d.n;
  const int64_t sBias = batch > 1 ? d.biasBatchStride : 0;
  const size_t nBias = forwardBias || biasGrad ? (batch - 1) * sBias + biasLen : 0;

  auto rounded = [](DType t, std::vector<float> v) {
    for (float& x : v) x = roundTo(t, x);
    return v;
  };
  std::vector<float> A = rounded(d.inputType, randomFloats(nA, seed));
  std::vector<float> B = rounded(d.inputType, randomFloats(nB, seed + 1));
  std::vector<float> C = rounded(d.outputType, randomFloats(nD, seed + 2));
  std::vector<float> bias = rounded(d.outputType, randomFloats(nBias, seed + 3));
  DeviceBuffer dA = put(d.inputType, A), dB = put(d.inputType, B), dD = put(d.outputType, C);
  DeviceBuffer dBias = nBias ? put(d.outputType, bias) : DeviceBuffer();
  lt->matmul(d, MatmulOperands{dA.data(), dB.data(), nullptr, dD.data(), dBias.data()}, ctx->stream());
  std::vector<float> got = get(d.outputType, dD, nD);
  std::vector<float> gotBias = nBias ? get(d.outputType, dBias, nBias) : std::vector<float>();

  auto opA = [&](int64_t b, int64_t i, int64_t p) { return A[b * sA + (d.transA ? p * d.m + i : i * d.k + p)]; };
  auto opB = [&](int64_t b, int64_t p, int64_t j) { return B[b * sB + (d.transB ? j * d.k + p : p * d.n + j)]; };
  // bf16/f16 outputs are rounded once more.
  const double outTol = d.outputType == DType::f32 ? 0 : d.outputType == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  double worstTanh = 0, worstErf = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          acc += double(opA(b, i, p)) * opB(b, p, j);
          mag += std::abs(double(opA(b, i, p)) * opB(b, p, j));
        }
        const double c = C[b * sD + i * d.n + j];
        double v = d.alpha * acc + d.beta * c;
        mag = std::abs(d.alpha) * mag + std::abs(d.beta * c);
        if (forwardBias) {
          v += bias[b * sBias + j];
          mag += std::abs(bias[b * sBias + j]);
        }
        double want = v, wantErf = v;
        if (d.epilogue == Epilogue::relu || d.epilogue == Epilogue::biasRelu) want = wantErf = std::max(v, 0.0);
        if (d.epilogue == Epilogue::gelu || d.epilogue == Epilogue::biasGelu) want = gelu(v), wantErf = geluErf(v);
        const double g = got[b * sD + i * d.n + j];
        worstTanh = std::max(worstTanh, std::abs(g - want));
        worstErf = std::max(worstErf, std::abs(g - wantErf));
        // GELU: cuBLASLt's may use a fast tanh; the errors against both forms are printed below.
        const double geluTol = want != wantErf ? 2e-3 * std::abs(v) : 0;
        ASSERT_LE(std::abs(g - want), tol * mag + outTol * std::abs(want) + geluTol + 1e-6)
            << "D[" << b << "][" << i << "][" << j << "] = " << g << ", want " << want
            << (want != wantErf ? " (tanh GELU; erf GELU gives " + std::to_string(wantErf) + ")" : "");
      }
    }
  }
  if (d.epilogue == Epilogue::gelu || d.epilogue == Epilogue::biasGelu)
    std::printf("%s: max |error| %.3g against the tanh GELU, %.3g against the erf GELU\n", d.str().c_str(),
                worstTanh, worstErf);
  if (biasGrad) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < biasLen; ++i) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          double v = d.epilogue == Epilogue::biasGradA ? opA(b, i, p) : opB(b, p, i);
          want += v;
          mag += std::abs(v);
        }
        ASSERT_LE(std::abs(gotBias[b * sBias + i] - want), tol * mag + outTol * std::abs(want) + 1e-6)
            << "bias gradient [" << b << "][" << i << "] = " << gotBias[b * sBias + i] << ", want " << want;
      }
    }
  }
}

MatmulDesc shape(int64_t m, int64_t n, int64_t k, bool transA, bool transB) {
  MatmulDesc d;
  d.m = m, d.n = n, d.k = k;
  d.transA = transA, d.transB = transB;
  return d;
}

TEST_F(CudaBlasLt, F32AllTranspositionsBatched) {
  for (bool transA : {false, true}) {
    for (bool transB : {false, true}) {
      MatmulDesc d = shape(37, 19, 23, transA, transB);
      check(d, 1e-5);
      // Batch 3, strides padded past the matrices, alpha and beta in play.
      d.batch = 3;
      d.strideA = d.m * d.k + 5;
      d.strideB = d.k * d.n + 3;
      d.strideD = d.m * d.n + 7;
      d.alpha = 0.5f;
      d.beta = -1.5f;
      check(d, 1e-5, 11);
    }
  }
  EXPECT_EQ(lt->cachedPlans(), 8u);
  check(shape(37, 19, 23, false, false), 1e-5, 21);  // a cached plan, new data
  EXPECT_EQ(lt->cachedPlans(), 8u);
}

TEST_F(CudaBlasLt, Tf32WhenAllowed) {
  MatmulDesc d = shape(64, 48, 96, false, true);
  d.allowTf32 = true;
  check(d, 4e-3);
}

TEST_F(CudaBlasLt, LowPrecisionInputsWithF32Output) {
  for (DType in : {DType::bf16, DType::f16}) {
    for (bool transA : {false, true}) {
      for (bool transB : {false, true}) {
        MatmulDesc d = shape(37, 19, 23, transA, transB);
        d.inputType = in;
        check(d, 1e-5);
      }
    }
    MatmulDesc d = shape(64, 40, 72, false, false);
    d.inputType = d.outputType = in;  // and with a low-precision output
    check(d, 1e-5);
  }
}

TEST_F(CudaBlasLt, FusedActivationAndBiasEpilogues) {
  for (Epilogue e : {Epilogue::relu, Epilogue::gelu, Epilogue::bias, Epilogue::biasRelu, Epilogue::biasGelu}) {
    SCOPED_TRACE(std::string(epilogueName(e)));
    MatmulDesc d = shape(37, 19, 23, false, true);
    d.epilogue = e;
    check(d, 1e-5);
    d.inputType = DType::bf16;
    check(d, 1e-5, 3);
  }
}

TEST_F(CudaBlasLt, BiasGradientEpilogues) {
  // The weight gradients of a linear layer y = x·W + b (W [in×out]) and y = x·Wᵀ + b (W [out×in]),
  // with x [batch×in] and dy [batch×out]: dW = xᵀ·dy with db summed from B (dy), and
  // dWᵀ = dyᵀ·x with db summed from A (dy); both also give D.
  const int64_t batch = 23, in = 19, out = 37;
  MatmulDesc fromB = shape(in, out, batch, true, false);
  fromB.epilogue = Epilogue::biasGradB;
  check(fromB, 1e-5);
  MatmulDesc fromA = shape(out, in, batch, true, false);
  fromA.epilogue = Epilogue::biasGradA;
  check(fromA, 1e-5);
  fromA.inputType = DType::bf16;
  check(fromA, 1e-5, 5);
}

TEST_F(CudaBlasLt, RejectsBadDescriptions) {
  DeviceBuffer buf = ctx->allocate(1 << 16);
  MatmulOperands ops{buf.data(), buf.data(), nullptr, buf.data(), nullptr};
  MatmulDesc d = shape(8, 8, 8, false, false);
  d.outputType = DType::bf16;  // f32 inputs give f32 only
  EXPECT_THROW(lt->matmul(d, ops, ctx->stream()), Error);
  d = shape(8, 8, 8, false, false);
  d.epilogue = Epilogue::bias;  // no bias pointer
  EXPECT_THROW(lt->matmul(d, ops, ctx->stream()), Error);
  d = shape(8, 8, 8, false, false);
  d.epilogue = Epilogue::biasGradA;  // needs transA
  ops.bias = buf.data();
  try {
    lt->matmul(d, ops, ctx->stream());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bias_grad_a"));
    EXPECT_THAT(e.what(), HasSubstr("8x8x8"));
  }
}

}  // namespace
}  // namespace kiln::gpu
