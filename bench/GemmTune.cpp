// GFLOP/s of the generated GEMM (codegen/cpu/Gemm.h) on a few shapes, for tuning its blocking.
// Each shape is one f32 contraction kernel (--bf16: bf16 operands and result, f32 accumulation, as
// the amp pass makes them) whose epilogue copies the finished tiles into the result;
// it runs on pools of 1 and 2 threads, 20 timed runs of at least 0.05 s of repetitions each. It
// prints the best and the median run by wall time, the time of the best, and the best by CPU time
// ("cpu": flops over the CPU seconds spent divided by the thread count, i.e. the rate had every
// thread had a core to itself, which a loaded machine still lets one measure).
//
//   kiln_gemm_tune [--bf16] [--cold] [--threads 1|2] [--kc N] [--mb N] [--nb N] [--mr N] [--nr N] [--pack-a] [--plan] [--sweep]
//                  [M N K [ta tb] | conv N C H W O K]
//
// --kc, --mb and --nb replace the packed path's blocking limits (VectorIsa::gemmKc, …: the K slice,
// the rows and the columns of a C block, rounded to the register tile); --sweep runs each shape
// under a grid of them (7 timed runs of 0.02 s each), the ISA's own limits first, to find the
// limits of a new machine (scripts/gpu-check tune does it on the GPU machines' AVX-512 hosts).
// --pack-a packs A into panels even where the micro-kernel would read its rows in place.
// --plan prints each shape's blocking (path, register tile, K slice, blocks, items, in-place reads).
// --cold times each call alone after writing 64 MiB of other data, so that its operands come from
// memory as inside a training step. --threads times one pool only (to profile one of them).
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/GemmEmitter.h"
#include "codegen/cpu/Jit.h"
#include "ir/Parser.h"
#include "kernels/Gemm.h"
#include "runtime/HostTensor.h"
#include "runtime/ThreadPool.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <random>

namespace {

using namespace kiln;

/// The operands' and result's dtype: "f32", or "bf16" (--bf16).
std::string operandDtype = "f32";

/// One contraction node: `%r = OP(%a, %b) {ATTRS} : RESULT`.
struct Shape {
  std::string a, b, op, attrs, result;
  double flops;
  std::string label;  // what the operand types do not say
};

Shape matmul(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false) {
  const std::string& t = operandDtype;
  return {ta ? fmt::format("{}[{},{}]", t, k, m) : fmt::format("{}[{},{}]", t, m, k),
          tb ? fmt::format("{}[{},{}]", t, n, k) : fmt::format("{}[{},{}]", t, k, n), "matmul",
          fmt::format("transpose_a={}, transpose_b={}", ta, tb), fmt::format("{}[{},{}]", t, m, n),
          2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
          ta || tb ? fmt::format("{}{}", ta ? "Aᵀ" : "A", tb ? "Bᵀ" : "B") : ""};
}

/// conv2d of x[n,c,h,w] with w[o,c,k,k], stride 1, padding k/2 ("same").
Shape conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k) {
  const std::string& t = operandDtype;
  return {fmt::format("{}[{},{},{},{}]", t, n, c, h, w), fmt::format("{}[{},{},{},{}]", t, o, c, k, k), "conv2d",
          fmt::format("padding=[{},{}]", k / 2, k / 2), fmt::format("{}[{},{},{},{}]", t, n, o, h, w),
          2.0 * static_cast<double>(n * o * h * w) * static_cast<double>(c * k * k),
          fmt::format("padding {}", k / 2)};
}

/// void epilogue(bufs, tile, ldt, b, m0, m1, n0, n1): copies the f32 tile into the result bufs[out]
/// at row-major [.., M, N], of dtype f32 or bf16 (`bf16`: the upper half of each f32, truncated).
llvm::Function* copyEpilogue(llvm::Module& m, size_t out, int64_t resultM, int64_t resultN, bool bf16) {
  return cpu::pointEpilogue(
      m, "copy_epilogue", cpu::AccType::F32, resultM, resultN, {out},
      [&](llvm::IRBuilderBase& b, const std::vector<llvm::Value*>& buffers, llvm::Value* element, llvm::Value* index) {
        llvm::Value* v = b.CreateLoad(b.getFloatTy(), element);
        llvm::Type* st = bf16 ? b.getInt16Ty() : b.getFloatTy();
        if (bf16) v = b.CreateTrunc(b.CreateLShr(b.CreateBitCast(v, b.getInt32Ty()), 16), st);
        b.CreateStore(v, b.CreateGEP(st, buffers[0], index));
      });
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// CPU time of the calling thread (`process` false) or of the whole process.
double cpuSeconds(bool process) {
  timespec t{};
  clock_gettime(process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Timing {
  int reps = 20;
  double minSeconds = 0.05;
};

/// --cold: each timed call runs once after 64 MiB of other data were written, so its operands
/// come from memory, as in a training step where other kernels ran in between.
bool coldCalls = false;
bool printPlan = false;  // --plan: print each shape's blocking (gemm::Blocking) before timing it

/// The blocking's main choices on one line: path, register tile, K slice, C blocks, items and
/// threads, and how A and B are read.
std::string describePlan(const cpu::gemm::Blocking& p) {
  using cpu::gemm::Path;
  std::string s = fmt::format("  plan: {} tile {}x{}{} kc {} ({} slice{}) block {}x{} ({}x{}) items {} grain {}",
                              p.path == Path::Small ? "small" : p.path == Path::SplitK ? "splitk" : "packed", p.mr,
                              p.nr, p.amx ? " amx" : "", p.kc, p.kBlocks, p.kBlocks == 1 ? "" : "s", p.mb, p.nb,
                              p.mBlocks, p.nBlocks, p.items, p.grain);
  if (p.path == Path::SplitK) s += fmt::format(" splits {} reduce items {}", p.splits, p.reduceItems);
  if (p.awakeOnly) s += " awake-only";
  if (p.aInPlace) s += p.aColumns ? " A-columns-in-place" : p.aRun ? " A-runs-in-place" : " A-rows-in-place";
  if (p.reuseA) s += " A-reused";
  if (p.reuseB) s += " B-reused";
  return s;
}
int onlyThreads = 0;  // --threads: time this pool size alone

void evictCaches() {
  static std::vector<char> junk(size_t{64} << 20);
  static char value = 0;
  std::fill(junk.begin(), junk.end(), ++value);
}

void run(cpu::Jit& jit, const Shape& s, const cpu::VectorIsa& isa, const Timing& timing = {}) {
  const std::string node = fmt::format("%r = {}(%a, %b) {{{}}} : {}", s.op, s.attrs, s.result);
  ir::Graph g = ir::parseGraph(
      fmt::format("graph @g {{\n  input %a : {}\n  input %b : {}\n  {}\n  output %r = %r\n}}\n", s.a, s.b, node),
      "gemm_tune.kir");
  kernels::Kernel k = kernels::lowerGraph(g).at(0);
  const kernels::GemmForm form = kernels::gemmForm(k);
  auto m = std::make_unique<llvm::Module>("gemm_tune", jit.context());
  const size_t out = static_cast<size_t>(k.outputs.at(0));
  cpu::emitContraction(*m, "gemm", k, copyEpilogue(*m, out, form.groups * form.m, form.n, operandDtype == "bf16"), isa);
  cpu::CompileOptions options;
  options.pipeline = cpu::CompileOptions::Pipeline::Light;  // as cpu::Program compiles kernels
  if (const char* dir = std::getenv("KILN_GEMM_DUMP")) options.dumpDir = dir, options.dumpStem = "gemm";
  auto compiled = jit.compile(std::move(m), options);
  auto fn = compiled->fn<void(void**, void*)>("gemm");

  std::vector<rt::HostTensor> tensors;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const kernels::Buffer& buf : k.buffers) {
    tensors.emplace_back(buf.type.dtype, buf.type.shape);
    for (int64_t i = 0; i < tensors.back().numel(); ++i) tensors.back().set(i, u(rng));
  }
  std::string line = fmt::format("{:<64} compile {:4.0f} ms", fmt::format("{}({}, {}) {}", s.op, s.a, s.b, s.label),
                                 compiled->compileMs());
  if (printPlan)
    fmt::print("{}\n", describePlan(cpu::gemm::blockingFor(form, cpu::AccType::F32, isa,
                                                            operandDtype == "bf16" ? DType::bf16 : DType::f32)));
  if (isa.gemmKc || isa.gemmMb || isa.gemmNb)
    line += fmt::format("  kc {:4} mb {:4} nb {:4}", isa.gemmKc, isa.gemmMb, isa.gemmNb);
  if (isa.gemmMr || isa.gemmNr) line += fmt::format("  tile {}x{}", isa.gemmMr, isa.gemmNr);
  if (isa.gemmPackA) line += "  A packed";
  const double flops = s.flops;
  for (int threads : {1, 2}) {
    if (onlyThreads != 0 && threads != onlyThreads) continue;
    rt::ThreadPool pool(threads);
    rt::HostTensor scratch(DType::boolean, {std::max<int64_t>(cpu::contractionScratchBytes(k, isa, threads), 1)});
    std::vector<void*> bufs;
    for (rt::HostTensor& t : tensors) bufs.push_back(t.data());
    bufs.push_back(scratch.data());
    fn(bufs.data(), &pool);  // warm up
    std::vector<double> times;
    double bestCpu = 1e30;
    for (int rep = 0; rep < timing.reps; ++rep) {
      int calls = 0;
      if (coldCalls) evictCaches();
      const auto start = std::chrono::steady_clock::now();
      const double cpuStart = cpuSeconds(threads > 1);
      double elapsed = 0;
      do {
        fn(bufs.data(), &pool);
        ++calls;
        elapsed = seconds(std::chrono::steady_clock::now() - start);
      } while (!coldCalls && elapsed < timing.minSeconds);
      times.push_back(elapsed / calls);
      bestCpu = std::min(bestCpu, (cpuSeconds(threads > 1) - cpuStart) / calls / threads);
    }
    std::sort(times.begin(), times.end());
    const double best = times.front(), median = times[times.size() / 2];
    line += fmt::format("   {}T {:6.1f} (median {:6.1f}) GFLOP/s {:8.1f} µs, cpu {:6.1f}", threads, flops / best * 1e-9,
                        flops / median * 1e-9, best * 1e6, flops / bestCpu * 1e-9);
  }
  fmt::print("{}\n", line);
}

/// The shape under the ISA's own limits, then under every limit of a grid (0: the ISA's own):
/// rows of C blocks, K slices, columns of C blocks.
void sweep(cpu::Jit& jit, const Shape& s, cpu::VectorIsa isa) {
  const Timing quick{7, 0.02};
  run(jit, s, isa, quick);
  for (int64_t mb : {48, 96, 144, 288})
    for (int64_t kc : {128, 192, 256, 384})
      for (int64_t nb : {256, 512, 1024}) {
        isa.gemmMb = mb, isa.gemmKc = kc, isa.gemmNb = nb;
        run(jit, s, isa, quick);
      }
}

int usage() {
  fmt::print(stderr,
             "usage: kiln_gemm_tune [--bf16 [--no-amx|--no-pairs]] [--cold] [--threads 1|2] [--kc N] [--mb N] [--nb N] [--mr N] [--nr N] "
             "[--pack-a] [--plan] [--sweep] [M N K [ta tb] | conv N C H W O K]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cpu::Jit jit;
  jit.defineSymbol("kiln_parallel_for", reinterpret_cast<const void*>(&kiln_parallel_for));
  cpu::VectorIsa isa = cpu::isaOf(jit);
  bool sweeping = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sweep") {
      sweeping = true;
    } else if (a == "--plan") {
      printPlan = true;
    } else if (a == "--cold") {
      coldCalls = true;
    } else if (a == "--threads") {
      if (i + 1 >= argc) return usage();
      onlyThreads = std::atoi(argv[++i]);
      if (onlyThreads != 1 && onlyThreads != 2) return usage();
    } else if (a == "--pack-a") {
      isa.gemmPackA = true;
    } else if (a == "--bf16") {
      operandDtype = "bf16";
    } else if (a == "--no-amx") {  // bf16 on vdpbf16ps k pairs, not the tiles
      isa.amx = false;
    } else if (a == "--no-pairs") {  // bf16 widened to f32 and the FMAs
      isa.amx = false, isa.bf16DotPays = false;
    } else if (a == "--kc" || a == "--mb" || a == "--nb") {
      if (i + 1 >= argc) return usage();
      const int64_t v = std::atoll(argv[++i]);
      if (v <= 0) return usage();
      (a == "--kc" ? isa.gemmKc : a == "--mb" ? isa.gemmMb : isa.gemmNb) = v;
    } else if (a == "--mr" || a == "--nr") {
      if (i + 1 >= argc) return usage();
      const int v = std::atoi(argv[++i]);
      if (v <= 0 || (a == "--nr" && v % isa.f32Lanes != 0)) return usage();
      (a == "--mr" ? isa.gemmMr : isa.gemmNr) = v;
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      args.push_back(a);
    }
  }
  auto arg = [&](size_t i) { return std::atoll(args[i].c_str()); };
  std::vector<Shape> shapes;
  if (args.size() == 7 && args[0] == "conv") {
    shapes.push_back(conv(arg(1), arg(2), arg(3), arg(4), arg(5), arg(6)));
  } else if (args.size() == 3 || args.size() == 5) {
    shapes.push_back(matmul(arg(0), arg(1), arg(2), args.size() == 5 && arg(3) != 0, args.size() == 5 && arg(4) != 0));
  } else if (args.empty()) {
    shapes = {matmul(512, 512, 512),         matmul(1024, 1024, 1024),       matmul(2048, 2048, 2048),
              matmul(10000, 512, 1000),      matmul(100, 128, 784),          matmul(64, 32, 64),
              matmul(1024, 1024, 1024, true, false), matmul(1024, 1024, 1024, false, true),
              matmul(100, 128, 784, true, false),    matmul(100, 128, 784, false, true),
              conv(32, 64, 28, 28, 64, 3),   conv(32, 3, 32, 32, 16, 3)};
  } else {
    return usage();
  }
  for (const Shape& s : shapes) sweeping ? sweep(jit, s, isa) : run(jit, s, isa);
  return 0;
}
