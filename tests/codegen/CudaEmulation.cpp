#include "tests/codegen/CudaEmulation.h"

#include "support/DType.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kiln::cudatest {
namespace {

// Before the program: CUDA's keywords, built-in variables, barriers and warp exchanges on the host.
const char* kHarnessHead = R"(#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 gridDim, blockDim;
static std::barrier<>* kiln_emu_block;
static void __syncthreads() { kiln_emu_block->arrive_and_wait(); }
#define __noinline__ __attribute__((noinline))
// The named barriers of launch chains (bar.sync id, n): a barrier of n threads per (id, n).
static std::mutex kiln_emu_named_mutex;
static std::map<std::pair<unsigned, unsigned>, std::unique_ptr<std::barrier<>>> kiln_emu_named;
static void kiln_sync(unsigned id, unsigned n) {
  std::barrier<>* b;
  {
    std::lock_guard<std::mutex> lock(kiln_emu_named_mutex);
    std::unique_ptr<std::barrier<>>& slot = kiln_emu_named[{id, n}];
    if (!slot) slot = std::make_unique<std::barrier<>>(n);
    b = slot.get();
  }
  b->arrive_and_wait();
}
// A chain's shared memory (one block runs at a time).
alignas(16) static unsigned char kiln_smem[48 << 10];
// A warp-wide operation: every lane deposits its operands, the last to arrive computes every lane's
// results (the barrier's completion step), then all lanes continue: one barrier phase per operation.
struct KilnWarp;
struct KilnWarpStep {
  KilnWarp* warp;
  void operator()() noexcept;
};
struct KilnWarp {
  std::barrier<KilnWarpStep> bar;
  void (*op)(KilnWarp&) = nullptr;
  int offset = 0;
  unsigned char in[32][8], out[32][8];   // __shfl_down_sync
  const unsigned short* rows[32];         // ldmatrix
  unsigned result[32][4];
  unsigned a[32][4], b[32][2];            // mma
  float* d[32];
  bool bf16 = false;
  explicit KilnWarp(int lanes) : bar(lanes, KilnWarpStep{this}) {}
  void sync(void (*f)(KilnWarp&)) {
    op = f;
    bar.arrive_and_wait();
  }
};
void KilnWarpStep::operator()() noexcept { warp->op(*warp); }
static KilnWarp* kiln_emu_warp[32];
static KilnWarp& kiln_emu_this_warp() { return *kiln_emu_warp[threadIdx.x / 32]; }
struct alignas(16) float4 { float x, y, z, w; };
template <class T> static T __shfl_down_sync(unsigned, T v, int off) {
  const unsigned lane = threadIdx.x % 32;
  KilnWarp& w = kiln_emu_this_warp();
  std::memcpy(w.in[lane], &v, sizeof(T));
  w.offset = off;
  w.sync([](KilnWarp& w) {
    for (int l = 0; l < 32; ++l) std::memcpy(w.out[l], w.in[l + w.offset < 32 ? l + w.offset : l], 8);
  });
  T r;
  std::memcpy(&r, w.out[lane], sizeof(T));
  return r;
}
#define KILN_GEMM_MMA_HELPERS
static void kiln_ldmatrix_x4(unsigned r[4], const unsigned short* p);
static void kiln_mma_bf16(float* d, const unsigned a[4], const unsigned b[2]);
static void kiln_mma_f16(float* d, const unsigned a[4], const unsigned b[2]);
)";

// After the program: ldmatrix and mma.sync from the PTX ISA's fragment layouts, and the launcher.
const char* kHarnessTail = R"(
// ldmatrix .x4: lanes 8m..8m+7 give the rows of matrix m; lane l receives, from each matrix m,
// the two elements at row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, in register m.
static void kiln_ldmatrix_x4(unsigned r[4], const unsigned short* p) {
  const unsigned lane = threadIdx.x % 32;
  KilnWarp& w = kiln_emu_this_warp();
  w.rows[lane] = p;
  w.sync([](KilnWarp& w) {
    for (int l = 0; l < 32; ++l)
      for (int m = 0; m < 4; ++m) {
        const unsigned short* row = w.rows[m * 8 + l / 4];
        w.result[l][m] = static_cast<unsigned>(row[2 * (l % 4)]) | static_cast<unsigned>(row[2 * (l % 4) + 1]) << 16;
      }
  });
  for (int m = 0; m < 4; ++m) r[m] = w.result[lane][m];
}
static float kiln_emu_element(unsigned reg, int high, bool bf16) {
  const unsigned short h = static_cast<unsigned short>(high ? reg >> 16 : reg & 0xffffu);
  return bf16 ? kiln_f32_bits(static_cast<unsigned>(h) << 16) : kiln_host_f16_to_f32(h);
}
// mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
// g = lane >> 2, t = lane % 4: A element i (register i / 2, half i % 2) at row g (+8 for i in
// {2,3,6,7}), column 2t + (i & 1) (+8 for i >= 4); B element i at row 2t + (i & 1) (+8 for
// i >= 2), column g; C element i at row g (+8 for i >= 2), column 2t + (i & 1).
static void kiln_emu_mma(float* d, const unsigned a[4], const unsigned b[2], bool bf16) {
  const unsigned lane = threadIdx.x % 32;
  KilnWarp& w = kiln_emu_this_warp();
  for (int i = 0; i < 4; ++i) w.a[lane][i] = a[i];
  w.b[lane][0] = b[0];
  w.b[lane][1] = b[1];
  w.d[lane] = d;
  w.bf16 = bf16;
  w.sync([](KilnWarp& w) {
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      for (int i = 0; i < 8; ++i) {
        const int row = g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0), col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        A[row][col] = kiln_emu_element(w.a[l][i / 2], i & 1, w.bf16);
      }
      for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = kiln_emu_element(w.b[l][i / 2], i & 1, w.bf16);
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      for (int c = 0; c < 4; ++c) {
        const int row = g + (c >= 2 ? 8 : 0), col = 2 * t + (c & 1);
        float s = w.d[l][c];
        for (int k = 0; k < 16; ++k) s = std::fmaf(A[row][k], B[k][col], s);
        w.d[l][c] = s;
      }
    }
  });
}
static void kiln_mma_bf16(float* d, const unsigned a[4], const unsigned b[2]) { kiln_emu_mma(d, a, b, true); }
static void kiln_mma_f16(float* d, const unsigned a[4], const unsigned b[2]) { kiln_emu_mma(d, a, b, false); }
template <class... P, std::size_t... I>
static void kiln_emu_apply(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(static_cast<P>(a[I])...);
}
template <class... P>
static void kiln_emu_call(void (*f)(P...), void** a) {
  kiln_emu_apply(f, a, std::index_sequence_for<P...>{});
}
extern "C" void kiln_emu_launch(void (*entry)(void**), void** args, unsigned grid, unsigned block) {
  gridDim.x = grid;
  blockDim.x = block;
  // A launch starts blockDim threads once; each runs its part of every block in turn and waits at
  // `done` after each, so a block starts only when all have finished the one before (the
  // __shared__ statics are the same arrays). Threads started per block made the emulated tests
  // 3–6 times slower.
  std::barrier<> all(block), done(block);
  std::vector<std::unique_ptr<KilnWarp>> warps;
  for (unsigned w = 0; w * 32 < block; ++w) {
    warps.push_back(std::make_unique<KilnWarp>(block - w * 32 < 32 ? block - w * 32 : 32));
    kiln_emu_warp[w] = warps.back().get();
  }
  kiln_emu_block = &all;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([=, &done] {
      threadIdx.x = t;
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        entry(args);
        done.arrive_and_wait();
      }
    });
  for (std::thread& th : threads) th.join();
}
)";

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double loadAs(DType t, const void* base, int64_t i) {
  return loadAsDouble(t, static_cast<const std::byte*>(base) + i * dtypeSize(t));
}

void storeAs(DType t, void* base, int64_t i, double v) {
  storeFromDouble(t, static_cast<std::byte*>(base) + i * dtypeSize(t), v);
}

/// cuBLASLt's product in kiln's row-major terms (Render.h BlasMatmul), accumulated in f32.
void blasOnHost(const cuda::BlasMatmul& p, const std::vector<void*>& refs) {
  using E = cuda::BlasMatmul::Epilogue;
  const void *a = refs.at(static_cast<size_t>(p.a)), *b = refs.at(static_cast<size_t>(p.b));
  void* d = refs.at(static_cast<size_t>(p.d));
  const void* bias = p.bias >= 0 ? refs.at(static_cast<size_t>(p.bias)) : nullptr;
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        float s = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          int64_t ai = bt * p.strideA + (p.transA ? q * p.m + i : i * p.k + q);
          int64_t bi = bt * p.strideB + (p.transB ? j * p.k + q : q * p.n + j);
          s = std::fmaf(static_cast<float>(loadAs(p.typeA, a, ai)), static_cast<float>(loadAs(p.typeB, b, bi)), s);
        }
        if (p.epilogue == E::Bias || p.epilogue == E::BiasRelu || p.epilogue == E::BiasGelu)
          s += static_cast<float>(loadAs(p.typeD, bias, j));
        if (p.epilogue == E::Relu || p.epilogue == E::BiasRelu) s = s > 0 ? s : 0;
        if (p.epilogue == E::Gelu || p.epilogue == E::BiasGelu)
          s = 0.5f * s * (1 + std::tanh(0.7978845608028654f * (s + 0.044715f * s * s * s)));
        storeAs(p.typeD, d, bt * p.strideD + i * p.n + j, s);
      }
}

}  // namespace

bool emulationAvailable(std::string* why) {
#ifdef KILN_HOST_CXX
  if (access(KILN_HOST_CXX, X_OK) == 0) return true;
  if (why) *why = fmt::format("the host compiler {} cannot be run", KILN_HOST_CXX);
#else
  if (why) *why = "no host compiler configured (KILN_HOST_CXX)";
#endif
  return false;
}

struct Emulator::Impl {
  using Entry = void (*)(void**);
  using Launcher = void (*)(Entry, void**, unsigned, unsigned);
  std::filesystem::path dir;
  void* lib = nullptr;
  Launcher launch = nullptr;
};

Emulator::Emulator(const std::vector<cuda::RenderedKernel>& kernels) : impl_(std::make_unique<Impl>()) {
#ifndef KILN_HOST_CXX
  KILN_THROW("no host compiler configured");
#else
  static std::atomic<int> counter{0};
  impl_->dir = std::filesystem::temp_directory_path() /
               fmt::format("kiln-cuda-emu-{}-{}", static_cast<long>(getpid()), counter++);
  std::filesystem::create_directories(impl_->dir);
  std::string source = kHarnessHead + cuda::programSource(kernels) + kHarnessTail;
  for (const cuda::RenderedKernel& r : kernels)
    for (const cuda::Step& s : r.steps)
      if (s.kind == cuda::Step::Kind::Launch)
        source += fmt::format("extern \"C\" void emu_{0}(void** a) {{ kiln_emu_call({0}, a); }}\n", s.launch.entry);
  std::filesystem::path src = impl_->dir / "program.cpp", lib = impl_->dir / "program.so", log = impl_->dir / "log.txt";
  std::ofstream(src) << source;
  std::string cmd = fmt::format("{} -std=c++20 -O0 -w -shared -fPIC -pthread {} -o {} > {} 2>&1", KILN_HOST_CXX,
                                src.string(), lib.string(), log.string());
  if (std::system(cmd.c_str()) != 0) KILN_THROW("host compile of the emulated program failed:\n{}", readFile(log));
  impl_->lib = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(impl_->lib, "dlopen {}: {}", lib.string(), dlerror());
  impl_->launch = reinterpret_cast<Impl::Launcher>(dlsym(impl_->lib, "kiln_emu_launch"));
  KILN_CHECK(impl_->launch, "no launcher in the emulated program");
#endif
}

Emulator::~Emulator() {
  if (impl_->lib) dlclose(impl_->lib);
  std::error_code ignored;
  std::filesystem::remove_all(impl_->dir, ignored);
}

void Emulator::run(const cuda::RenderedKernel& r, const std::vector<void*>& buffers, const std::vector<void*>& scratch) {
  std::vector<void*> refs = buffers;
  refs.insert(refs.end(), scratch.begin(), scratch.end());
  for (const cuda::Step& s : r.steps) {
    if (s.kind == cuda::Step::Kind::Blas) {
      blasOnHost(s.blas, refs);
      continue;
    }
    const cuda::Launch& l = s.launch;
    auto entry = reinterpret_cast<Impl::Entry>(dlsym(impl_->lib, ("emu_" + l.entry).c_str()));
    KILN_CHECK(entry, "no entry {} in the emulated program", l.entry);
    KILN_CHECK(l.grid[1] == 1 && l.grid[2] == 1 && l.block[1] == 1 && l.block[2] == 1,
               "the emulator runs one-dimensional launches only ({})", l.entry);
    std::vector<void*> args;
    for (cuda::BufferRef a : l.args) args.push_back(refs.at(static_cast<size_t>(a)));
    impl_->launch(entry, args.data(), static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.block[0]));
  }
}

struct EmulatedGraphs::Impl {
  struct Entry {
    std::unique_ptr<ir::Graph> graph;
    std::vector<kernels::Kernel> kernels;
    size_t first = 0;  // its first rendered kernel in `rendered`
  };
  std::vector<Entry> graphs;
  std::vector<cuda::RenderedKernel> rendered;
  std::unique_ptr<Emulator> emulator;
};

EmulatedGraphs::EmulatedGraphs() : impl_(std::make_unique<Impl>()) {}
EmulatedGraphs::~EmulatedGraphs() = default;

size_t EmulatedGraphs::add(ir::Graph graph, Renderer render) {
  KILN_CHECK(graph.params().empty(), "emulated graphs take inputs, not parameters");
  Impl::Entry e;
  e.graph = std::make_unique<ir::Graph>(std::move(graph));
  e.kernels = kernels::lowerGraph(*e.graph);
  e.first = impl_->rendered.size();
  size_t index = impl_->graphs.size();
  for (kernels::Kernel& k : e.kernels) {
    k.name = fmt::format("G{}_{}", index, k.name);
    impl_->rendered.push_back(render(k));
  }
  impl_->graphs.push_back(std::move(e));
  return index;
}

void EmulatedGraphs::compile() { impl_->emulator = std::make_unique<Emulator>(impl_->rendered); }

const ir::Graph& EmulatedGraphs::graph(size_t i) const { return *impl_->graphs.at(i).graph; }

std::vector<cuda::RenderedKernel> EmulatedGraphs::rendered(size_t i) const {
  const Impl::Entry& e = impl_->graphs.at(i);
  return {impl_->rendered.begin() + static_cast<ptrdiff_t>(e.first),
          impl_->rendered.begin() + static_cast<ptrdiff_t>(e.first + e.kernels.size())};
}

interp::TensorMap EmulatedGraphs::run(size_t i, const interp::TensorMap& inputs) {
  KILN_CHECK(impl_->emulator, "EmulatedGraphs::run before compile");
  const Impl::Entry& e = impl_->graphs.at(i);
  std::map<const ir::Value*, rt::HostTensor> memory;
  for (const ir::Value* v : e.graph->inputs()) memory.emplace(v, inputs.at(v->name));
  for (size_t ki = 0; ki < e.kernels.size(); ++ki) {
    const kernels::Kernel& k = e.kernels[ki];
    const cuda::RenderedKernel& r = impl_->rendered[e.first + ki];
    std::vector<void*> buffers;
    for (const kernels::Buffer& b : k.buffers) {
      auto it = memory.find(b.value);
      if (it == memory.end()) {
        rt::HostTensor t(b.type.dtype, b.type.shape);
        if (b.role == kernels::Buffer::Role::Constant) {
          const ir::Floats& v = b.value->producer->attrFloats("value");
          for (int64_t x = 0; x < t.numel(); ++x) t.set(x, v[v.size() == 1 ? 0 : static_cast<size_t>(x)]);
        } else {
          // Results start as garbage, so an element the kernel never writes shows.
          std::memset(t.data(), 0x7f, t.bytes());
        }
        it = memory.emplace(b.value, std::move(t)).first;
      }
      buffers.push_back(it->second.data());
    }
    std::vector<std::vector<std::byte>> scratch;
    std::vector<void*> scratchPtrs;
    for (int64_t bytes : r.scratchBytes) {
      scratch.emplace_back(static_cast<size_t>(bytes) + 16, std::byte{0xff});
      scratchPtrs.push_back(scratch.back().data());
    }
    impl_->emulator->run(r, buffers, scratchPtrs);
  }
  interp::TensorMap out;
  for (const ir::Output& o : e.graph->outputs()) out.emplace(o.name, memory.at(o.value));
  return out;
}

}  // namespace kiln::cudatest
