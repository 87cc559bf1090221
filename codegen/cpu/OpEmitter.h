// Internal to the op kernels (RenderOps.cpp, RenderPool.cpp): OpEmitter builds one op kernel as a
// chunk function over independent work items, plus the kernel function that runs the chunk inline
// or across the thread pool, and gives the chunk's body counted loops, vector/scalar runs and
// element access in kiln's storage and compute types (Elements.h).
//
// Loops are emitted with LLVM's unroller switched off unless a loop asks for it: once the chunk is
// inlined into a small kernel its outer loops have constant trip counts, and fully unrolling them
// (their memsets, their nested loops) makes huge blocks that take long to compile and run no faster.
#pragma once

#include "codegen/cpu/KernelAbi.h"
#include "kernels/Kernel.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace kiln::cpu::opkernels {

using llvm::Value;

/// Elements a kernel must touch before it is split across threads; each chunk gets at least this
/// many (the pool runs a range shorter than two grains inline anyway).
inline constexpr int64_t kParallelWork = 32768;

/// Values a loop carries from one iteration to the next.
using Carried = std::vector<Value*>;

/// Whether LLVM may unroll a loop: only small innermost bodies.
enum class Unroll : bool { No, Allowed };

class OpEmitter {
 public:
  OpEmitter(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa)
      : b(m.getContext()), m_(m), k_(k), isa_(isa) {}

  llvm::IRBuilder<> b;

  const ir::Node& node() const { return *k_.op; }
  const ir::TensorType& inType(size_t i) const { return k_.buffers[k_.inputs[i]].type; }
  const ir::TensorType& outType() const { return k_.buffers[k_.outputs[0]].type; }
  /// Base addresses inside the chunk: operand i, the result, the scratch area.
  Value* in(size_t i) const { return bases_[k_.inputs[i]]; }
  Value* out() const { return bases_[k_.outputs[0]]; }
  Value* scratch() const { return bases_.at(k_.buffers.size()); }

  /// Vector lanes for values of `t`: the ISA's f32 lanes for 32-bit (and narrower) compute types,
  /// half as many for 64-bit ones.
  int lanesFor(DType t) const {
    bool wide = t == DType::f64 || isInteger(t);
    return wide ? std::max(1, isa_.f32Lanes / 2) : isa_.f32Lanes;
  }

  /// Emits the kernel function k.name, which runs `body(begin, end)` over work items [0, items):
  /// inline, or across the pool in chunks of at least kParallelWork / workPerItem items when there
  /// are two such chunks. `scratch` says whether the chunk reads the scratch area's address.
  llvm::Function* emit(int64_t items, int64_t workPerItem, bool scratch,
                       const std::function<void(Value*, Value*)>& body);

  // ---- integers (i64) --------------------------------------------------------------------------

  Value* i64(int64_t v) { return b.getInt64(static_cast<uint64_t>(v)); }
  Value* add(Value* x, Value* y) { return b.CreateAdd(x, y, "", false, true); }
  Value* add(Value* x, int64_t y) { return add(x, i64(y)); }
  Value* sub(Value* x, Value* y) { return b.CreateSub(x, y, "", false, true); }
  Value* mul(Value* x, int64_t y) { return b.CreateMul(x, i64(y), "", false, true); }
  Value* mul(Value* x, Value* y) { return b.CreateMul(x, y, "", false, true); }
  Value* div(Value* x, int64_t y) { return b.CreateSDiv(x, i64(y)); }
  Value* rem(Value* x, int64_t y) { return b.CreateSRem(x, i64(y)); }
  Value* max(Value* x, Value* y) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y); }
  Value* min(Value* x, Value* y) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); }
  /// i + <0, 1, …, lanes-1> (i itself for one lane).
  Value* laneIndices(Value* i, int lanes);

  // ---- control flow ----------------------------------------------------------------------------

  /// for (i = begin; i < end; i += step): `body(i, carried)` returns the values the next iteration
  /// carries; returns the carried values after the loop (`init` when it does not run).
  Carried loop(Value* begin, Value* end, int64_t step, const Carried& init,
               const std::function<Carried(Value*, const Carried&)>& body, Unroll unroll = Unroll::No);
  /// for (i = begin; i < end; ++i) body(i), not unrolled.
  void loop(Value* begin, Value* end, const std::function<void(Value*)>& body);
  /// [begin, end) as runs of `lanes` elements, then one at a time: body(i, n) handles i .. i+n-1.
  void forLanes(Value* begin, Value* end, int lanes, const std::function<void(Value*, int)>& body,
                Unroll unroll = Unroll::No);
  /// if (cond) then(); else otherwise();
  void when(Value* cond, const std::function<void()>& then, const std::function<void()>& otherwise = {});

  // ---- memory ----------------------------------------------------------------------------------

  /// Elements index .. index+lanes-1 of a buffer of `t`, as stored.
  Value* loadRaw(Value* base, DType t, Value* index, int lanes);
  /// The same elements as compute values.
  Value* load(Value* base, DType t, Value* index, int lanes = 1);
  void storeRaw(Value* base, DType t, Value* index, Value* stored);
  /// Stores compute values (already rounded to `t`) as elements index .. index+lanes-1.
  void store(Value* base, DType t, Value* index, Value* v);
  /// Zeroes `count` elements from `index` (all-zero bytes: 0 of every dtype) with a memset.
  void zero(Value* base, DType t, Value* index, Value* count);
  /// Zeroes a short run of run-time length with vector stores, cheaper than a call to memset.
  void zeroShort(Value* base, DType t, Value* index, Value* count);
  void copy(Value* dst, Value* dstIndex, Value* src, Value* srcIndex, DType t, Value* count);

 private:
  Value* address(Value* base, DType t, Value* index);

  llvm::Module& m_;
  const kernels::Kernel& k_;
  VectorIsa isa_;
  std::vector<Value*> bases_;
};

/// x + y in `t`'s compute type, rounded to `t` (integers wrap).
Value* addIn(llvm::IRBuilderBase& b, DType t, Value* x, Value* y);

/// The accumulator type of a sum into `t`: f32 for f16/bf16 (rounded once at the end), else `t`.
inline DType sumType(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

// The pooling kernels (RenderPool.cpp).
llvm::Function* emitPool(OpEmitter& e);  // max_pool2d, avg_pool2d
llvm::Function* emitMaxPoolGrad(OpEmitter& e);
llvm::Function* emitAvgPoolGrad(OpEmitter& e);
/// Whether the windows of a pooling op (or its gradient) overlap: stride < kernel somewhere.
bool poolWindowsOverlap(const ir::Node& n);

}  // namespace kiln::cpu::opkernels
