// The kernel renderer's class, shared by the files that define its parts: Render.cpp (loop
// nests, loads, stores, expressions), RenderReduce.cpp (reductions) and RenderContraction.cpp (a
// contraction's epilogue). Internal to codegen/cpu; Render.h is the interface.
#pragma once

#include "codegen/cpu/KernelAbi.h"
#include "kernels/Kernel.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cpu::render {

using kernels::Affine;
using kernels::Expr;
using kernels::Kernel;
using kernels::LoopNest;

/// Points of work below which a nest runs on the calling thread: waking the pool costs about a
/// microsecond, a few thousand vectorized expression evaluations.
constexpr int64_t kParallelWork = 1 << 16;
// Independent vector accumulators of a reduction along the lane dimension: one chain of adds
// waits out the add's latency (3-4 cycles) per vector; four chains keep loads and adds in flight.
constexpr int kReduceChains = 4;

/// Renders one kernel description into module m: render() emits the kernel's function.
class KernelRenderer {
 public:
  KernelRenderer(llvm::Module& m, const Kernel& k, const VectorIsa& isa)
      : m_(m), ctx_(m.getContext()), b_(ctx_), k_(k), isa_(isa), lanes_(isa.f32Lanes) {}

  llvm::Function* render();

 private:
  // ---- small IR helpers --------------------------------------------------------------------

  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  llvm::Function* newFunction(const std::string& name, llvm::FunctionType* type,
                              llvm::GlobalValue::LinkageTypes linkage = llvm::GlobalValue::ExternalLinkage);

  llvm::AllocaInst* entryAlloca(llvm::Type* t);

  /// for (iv = lo; iv + step <= hi; iv += step) body(iv); returns the first iv that failed.
  llvm::Value* loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::function<void(llvm::Value*)>& body);

  /// Our loops are vectorized already and their trip counts are often constants: LLVM must
  /// neither vectorize nor unroll them (unrolling a 1000-point loop makes compiles take seconds).
  llvm::MDNode* loopMetadata();

  /// Lane loop over [lo, hi): whole vectors first, then one point at a time.
  /// `span` is the most points [lo, hi) can hold and `whole` whether hi - lo is always a multiple
  /// of the lane count, so loops that never run are not emitted.
  void laneLoop(llvm::Value* lo, llvm::Value* hi, int64_t span, bool whole,
                const std::function<void(llvm::Value*, int)>& body);

  /// Nested loops over the dimensions `dims` of the current nest, setting coords[d].
  void loopDims(const std::vector<size_t>& dims, size_t i, std::vector<llvm::Value*>& coords,
                const std::function<void()>& body);

  llvm::Value* bufferBase(int32_t buffer);

  // ---- points ------------------------------------------------------------------------------

  /// Where expressions are being evaluated: one coordinate per domain dimension (the lane
  /// dimension's is the first lane), the lane count, and memoized values.
  struct Point {
    std::vector<llvm::Value*> coords;
    int lanes = 1;
    std::vector<llvm::Value*> memo;
    std::vector<llvm::Value*>* reduced = nullptr;
    llvm::Value* acc = nullptr;  // contraction epilogues: the product at this point (lanes wide)
  };

  Point point(std::vector<llvm::Value*> coords, int lanes);

  /// An affine function at p: the scalar value at the first lane and the per-lane step.
  std::pair<llvm::Value*, int64_t> affine(const Affine& a, const Point& p);

  /// base + step * <0, 1, …, lanes-1>.
  llvm::Value* laneVector(llvm::Value* base, int64_t step, int lanes);

  llvm::Value* load(const kernels::Load& l, Point& p);

  void store(const kernels::Store& s, Point& p);

  // ---- expressions -------------------------------------------------------------------------

  llvm::Value* eval(int32_t i, Point& p);


  llvm::Value* op(const Expr& e, const std::vector<llvm::Value*>& a);

  /// The `random` op's draw for counter offset + x (x: i64 scalar or vector), at step 0.
  llvm::Value* random(const Expr& e, llvm::Value* x);

  // ---- reductions --------------------------------------------------------------------------

  /// The accumulator of reduction r: its identity (lanes wide) and combine.
  DType accumulatorType(const kernels::Reduction& r) const;

  llvm::Value* identity(const kernels::Reduction& r, int lanes);
  llvm::Value* combine(const kernels::Reduction& r, llvm::Value* acc, llvm::Value* x);
  /// The lanes of a vector accumulator combined into one value.
  llvm::Value* horizontal(const kernels::Reduction& r, llvm::Value* acc);

  /// The finished reduction as the reduction's dtype.
  llvm::Value* finish(const kernels::Reduction& r, llvm::Value* acc);

  // ---- nests -------------------------------------------------------------------------------

  /// Loads buffer bases at the top of the current function (the first argument is bufs).
  void loadBases();

  /// Runs the reductions along the lane dimension (reduced) for the current outer point (coords
  /// hold it; the other reduced dims are looped over `reducedDims`, the lane dimension innermost),
  /// filling `reduced`.
  void reduceAlongLanes(std::vector<llvm::Value*>& coords, const std::vector<size_t>& reducedDims,
                        std::vector<llvm::Value*>& reduced);

  /// The reductions over the reduced dimensions `reducedDims` (the lane dimension kept) at the
  /// vectors of n lanes starting at `xs`, all at once: one accumulator per vector and reduction,
  /// the reduced dimensions looped over once for all of them, so a row's vectors are read
  /// together. reduced[v] gets vector v's results.
  /// With `storeInside`, the first reduction's pass also makes the full stores (none reads a
  /// reduction's result), so the rows are read once.
  void reduceVectors(std::vector<llvm::Value*>& coords, const std::vector<llvm::Value*>& xs, int n,
                     const std::vector<size_t>& reducedDims, std::vector<std::vector<llvm::Value*>>& reduced,
                     bool storeInside = false);

  /// Prefetches the lines that the loads (and, with `withStores`, the full stores) of the point
  /// kReduceAhead steps further along dimension `dim` will touch. Column sums walk rows a row
  /// stride apart, a few vectors of each, where the hardware prefetchers barely look ahead:
  /// simplenet's ReLU gradient with its bias sums (10000 rows of 256 columns in bands of 64, a 1 KB
  /// stride; `kiln explain simplenet --train --optimizer adam --batch 10000 --measure`, Emerald
  /// Rapids VM, six interleaved pairs) 1109–1231 → 940–1083 µs; 24 steps ahead, the same.
  void prefetchAhead(const std::vector<llvm::Value*>& coords, size_t dim, bool withStores);

  void stores(Point& p, bool outer);

  /// Emits the chunk function of nest `index`: `void(void* bufs, i64 begin, i64 end)` over the
  /// nest's work items. Returns it with the item count and the grain for the thread pool.
  std::pair<llvm::Function*, std::array<int64_t, 2>> renderNest(const LoopNest& source, size_t index);

  // ---- contractions ------------------------------------------------------------------------

  /// How many leading dimensions of the contraction's result form its batch and M parts
  /// (kernels/Gemm.h: the result is row-major [batch, M, N]).
  std::array<int, 3> resultSplit() const;

  /// The epilogue `void(void** bufs, const ACC* tile, i64 ldt, i64 b, i64 m0, i64 m1, i64 n0,
  /// i64 n1)` (Gemm.h): the kernel's nest over one finished block of the product.
  llvm::Function* renderEpilogue();

  llvm::Function* renderContraction();

  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  const VectorIsa& isa_;
  const int lanes_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* bufs_ = nullptr;
  std::vector<llvm::Value*> bases_;
  const LoopNest* nest_ = nullptr;
  size_t lane_ = 0;
};

}  // namespace kiln::cpu::render
