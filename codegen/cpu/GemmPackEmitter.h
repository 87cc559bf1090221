// The emitter of the packing routines of operands read through index maps (convolution windows,
// padding, quotients; GemmPack.cpp's file comment has the ways it packs): GemmPack.cpp chooses the
// way per panel and emits the routine, GemmPackWays.cpp emits each way and the index arithmetic
// they share (the k table, the parts of a coordinate group).
#pragma once

#include "codegen/cpu/GemmEmitter.h"

#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instructions.h>

#include <functional>
#include <string>
#include <vector>

namespace kiln::cpu::gemm::pack {

using kernels::Affine;
using kernels::GemmOperand;

/// The affine functionals of an operand: its index, its bounds, its quotient values.
std::vector<const Affine*> functionals(const GemmOperand& op);

/// Emits the packing routine of a contraction's operand A (`a`) or B read through its index map,
/// with the signature of GemmEmitter.h's packFunctionType; emit() is the whole of its interface.
class PackEmitter {
 public:
  /// With `pairs`, panel rows are k pairs (GemmKernels.cpp's file comment): pair row j holds k 2j
  /// and 2j + 1 of each row in one 32-bit element (not for A on AMX tiles, whose layout differs).
  /// With `amx` (A on AMX tiles, where amxFits), panels in the tiles' layout (StridedPacker::amxAt:
  /// per 32 k, each of the 32 rows' 32 bf16 one row after the other).
  PackEmitter(GemmBuilder& g, bool a, bool pairs = false, bool amx = false)
      : g_(g), b_(g.b), op_(a ? g.form.a : g.form.b), label_(a ? "a" : "b"), pairs_(pairs), amx_(amx),
        width_(a ? g.plan.mr : g.plan.nr),
        rowDims_(a ? g.form.mDims : g.form.nDims),
        rowAt_(g.form.batchDims.size() + (a ? 0 : g.form.kDims.size())),
        kAt_(g.form.batchDims.size() + (a ? g.form.mDims.size() : 0)) {}

  llvm::Function* emit();

  /// Whether A's panels on AMX tiles can be packed straight into the tiles' layout, whose rows hold
  /// k: when A has no bounds, no quotients and no contiguous rows, it takes only the ways that
  /// read a row's k (the transposed and run ways: `lanes` k of a row, stored as they are) or one
  /// element at a time (the general way: each stored alone), not those that write the panel's
  /// rows at one k as a vector (contiguous rows, periodic).
  static bool amxFits(const GemmBuilder& g);

 private:
  /// One panel's rows in chunks of at most `lanes` rows (vectors the target holds in one
  /// register, so their masks stay native): the row part of every functional and which rows
  /// exist; and whether the index runs contiguously along all rows of the panel (a panel row is
  /// then one stretch of memory, whatever the bounds say).
  struct PanelRows {
    struct Chunk {
      int first, count;
      std::vector<llvm::Value*> parts;
      llvm::Value* valid;
    };
    std::vector<Chunk> chunks;
    llvm::Value* contiguous = nullptr;
  };

  bool fitsInt32() const;
  void buildKTable();
  bool kStretches() const;
  llvm::Value* groupPart(const Affine& a, size_t at, const std::vector<int64_t>& dims, llvm::Value* flat);
  std::vector<llvm::Value*> groupParts(size_t at, const std::vector<int64_t>& dims, llvm::Value* flat);
  llvm::Value* lanes(int first, int count);
  bool maskedLoads();
  PanelRows panelRows(llvm::Value* p, bool clamp = false);
  struct Row {
    llvm::Value *index, *valid;
  };
  std::vector<llvm::Value*> offsetsAt(llvm::Value* k);
  std::vector<Row> rowsAt(const PanelRows& pr, const std::vector<llvm::Value*>& offsets);
  std::vector<llvm::Value*> rowGeneral(const PanelRows& pr, llvm::Value* kk);
  void putChunk(const PanelRows::Chunk& c, llvm::Value* dstRow, llvm::Value* v);
  llvm::Value* pairOf(llvm::Value* even, llvm::Value* odd);
  /// A panel row's chunks (in the accumulator type) at k offset kk (index type) of the call.
  using RowValues = std::function<std::vector<llvm::Value*>(llvm::Value* kk)>;
  /// Where the routine's layout puts row (pair row, in pairs mode) i64 `row` of the panel at hand.
  using DstRow = std::function<llvm::Value*(llvm::Value* row)>;
  using PanelRow = std::function<llvm::Value*(llvm::Value* panel, llvm::Value* row)>;
  /// Rows [from, to) of a panel (i64; from even in pairs mode, or equal to `to`) from `row`: stored
  /// at dstRow(kk), or in pairs mode as the pair rows of rows 2j and 2j + 1 at dstRow(j), an odd
  /// `to`'s last row paired with zeros.
  void storeRows(const PanelRows& pr, llvm::Value* from, llvm::Value* to, const RowValues& row, const DstRow& dstRow);
  /// amx_: stores a panel row's chunks (accumulator type) as bf16 into the tiles' rows, row 0's
  /// element at `at` and the others kAmxK apart.
  void scatterAmx(const PanelRows& pr, llvm::Value* at, const std::vector<llvm::Value*>& values);
  int64_t maskPeriod() const;
  void packPeriodic(const PanelRows& pr, llvm::Value* kc, const DstRow& dstRow);
  void packContiguousRows(llvm::Value* panels, llvm::Value* kcPad, const PanelRow& dstRow);
  /// The second stretch of memory of `lanes` k steps that are two (packTransposed): its index's k
  /// part, less its first lane's place, and which lanes lie in the first stretch.
  struct SecondRun {
    llvm::Value *kPart, *firstLanes;
  };
  void packTransposed(const PanelRows& pr, llvm::Value* kPart, llvm::Value* dstRow, llvm::Value* k = nullptr,
                      const SecondRun* second = nullptr);
  llvm::Value* kTableEntry(llvm::Value* k, size_t functional, int lanes = 1);
  llvm::Value* kTableSpans(llvm::Value* k, int lanes);
  void prefetchRegion();
  llvm::Value* toIx(llvm::Value* v) { return b_.CreateTrunc(v, ix_); }
  llvm::Value* toI64(llvm::Value* v) { return b_.CreateSExt(v, b_.getInt64Ty()); }
  llvm::Align storeAlign() { return g_.storeAlign(); }

  GemmBuilder& g_;
  llvm::IRBuilder<>& b_;
  const GemmOperand& op_;
  const std::string label_;
  const bool pairs_;
  const bool amx_;
  const int width_;                       // MR or NR
  const std::vector<int64_t>& rowDims_;   // the m or n coordinates
  const size_t rowAt_, kAt_;              // where rows and k start in the map's coordinate vector
  // Set up by emit(), in the index type.
  llvm::Type* ix_ = nullptr;
  llvm::Value* base_ = nullptr;           // the operand's buffer
  std::vector<llvm::Value*> batchParts_;  // per functional, of the item's batch coordinates
  // When k needs divisions to unravel: every functional's k part plus its constant per k, laid
  // out [functional][k] with kRows_ = K (null: computed in the loop). When K rows would not fit,
  // the table holds the innermost k dimensions only (kRows_ of them) and every functional is
  // affine in the outer ones: its entry at k is table[k mod kRows_] + kOuter_ · (k / kRows_).
  llvm::GlobalVariable* kTable_ = nullptr;
  int64_t kRows_ = 0;
  std::vector<int64_t> kOuter_;  // per functional; empty when the table holds all of K
  std::vector<int64_t> kIndex_;  // the index functional's entries of the table, as numbers
  llvm::Value *r0_ = nullptr, *rows_ = nullptr, *k0_ = nullptr, *kc_ = nullptr;
  // The periodic way's masks: [phase][chunk] vectors of `lanes` index-type lanes (null: not used).
  int64_t period_ = 0;
  llvm::AllocaInst* masks_ = nullptr;
};

}  // namespace kiln::cpu::gemm::pack
