// Internal to the GEMM emitter (Gemm.cpp: blocking, micro-kernel, work items; GemmPack.cpp:
// packing): the blocking of one contraction and the IR-building state its parts share.
#pragma once

#include "codegen/cpu/Gemm.h"
#include "kernels/Gemm.h"

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <string>

namespace kiln::cpu::gemm {

constexpr int kUnroll = 4;                // K steps per micro-kernel loop iteration
constexpr int64_t kSlotHeaderBytes = 64;  // per-thread slot header: which B block its packed B holds

/// The blocking of one contraction for one ISA (see Gemm.cpp's file comment).
struct Blocking {
  int lanes = 0;           // accumulator elements per vector
  int mr = 0, nr = 0;      // register tile; nr is a multiple of lanes
  int64_t kc = 0;          // K slice, a multiple of kUnroll (0 when K is 0)
  int64_t kBlocks = 1;     // slices (at least one, so an empty K still writes zero tiles)
  int64_t mb = 0, nb = 0;  // C block, multiples of mr and nr
  int64_t mBlocks = 0, nBlocks = 0, items = 0;
  int64_t grain = 1;    // kiln_parallel_for grain; `items` keeps the GEMM on one thread
  bool reuseB = false;  // B is packed for all of K and reused by the next items of its block
  int64_t packBBytes = 0, packABytes = 0, tileBytes = 0;

  int64_t slotBytes() const { return kSlotHeaderBytes + packBBytes + packABytes + tileBytes; }
  bool parallel() const { return items >= 2 * grain; }
};

Blocking blockingFor(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa);

inline int accBytes(AccType acc) { return acc == AccType::F32 ? 4 : 8; }

/// The module, the builder and what every part of the emitter knows about the contraction, with
/// the IR helpers they share.
class GemmBuilder {
 public:
  GemmBuilder(llvm::Module& m, const std::string& name, const kernels::Kernel& k, const VectorIsa& isa);

  llvm::Module& m;
  llvm::LLVMContext& ctx;
  llvm::IRBuilder<> b;
  const std::string& name;  // of the kernel function; its helpers are NAME.part
  const kernels::Kernel& kernel;
  const VectorIsa& isa;
  const kernels::GemmForm form;
  const AccType acc;
  const Blocking plan;
  const DType dtype;            // of both operands
  llvm::Type* elt;              // the accumulator type
  llvm::FixedVectorType* vec;   // plan.lanes of it

  llvm::Value* i64(int64_t v) { return b.getInt64(static_cast<uint64_t>(v)); }
  /// `v` as an integer constant of `type` (a scalar or vector integer type).
  llvm::Constant* constant(llvm::Type* type, int64_t v) {
    return llvm::ConstantInt::get(type, static_cast<uint64_t>(v), /*IsSigned=*/true);
  }
  llvm::Value* splat(int lanes, llvm::Value* v) { return b.CreateVectorSplat(static_cast<unsigned>(lanes), v); }
  llvm::Value* min(llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSLT(x, y), x, y); }
  llvm::Type* withLanes(llvm::Type* t, int lanes) {
    return lanes == 1 ? t : llvm::FixedVectorType::get(t, static_cast<unsigned>(lanes));
  }
  llvm::Align eltAlign() const { return llvm::Align(static_cast<uint64_t>(accBytes(acc))); }

  /// A new internal function NAME.part of the module.
  llvm::Function* newFunction(const std::string& part, llvm::FunctionType* type);

  /// `for (i = begin; i < end; i += step) body(i)` on i64; the builder continues after the loop.
  void loop(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label,
            const std::function<void(llvm::Value*)>& body);
  /// Loop metadata that keeps LLVM from unrolling or vectorizing a loop (see Gemm.cpp).
  llvm::MDNode* loopAsWritten();

  /// The type an operand element is stored as (f16 and bf16 as their bit patterns).
  llvm::Type* storageType();
  /// Stored operand elements (a scalar or a vector of `lanes`) converted to the accumulator type.
  llvm::Value* toAcc(llvm::Value* v, int lanes);
};

/// The routine that packs operand A (`a`) or B of an item:
///
///     void pack(void** bufs, i64 b, i64 r0, i64 rows, i64 k0, i64 kc, i64 kcPad, ACC* dst)
///
/// packs rows [r0, r0 + rows) (the m coordinates of A, the n coordinates of B) and k in
/// [k0, k0 + kc) of batch b into panels of MR (NR) rows: panel p at dst + p·kcPad·width, element
/// (kk, r) of a panel at kk·width + r, zero where a row, a k or the map's bounds are out of range.
llvm::Function* emitPackFunction(GemmBuilder& g, bool a);

}  // namespace kiln::cpu::gemm
