// The packed, register-blocked GEMM of contraction kernels, after BLIS (Van Zee and van de Geijn,
// "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", TOMS 2015), in LLVM IR. This
// file describes the design and emits each kernel function and its descriptor; the blocking that
// the comment below explains is chosen in GemmBlocking.cpp, and the work itself is done by
// functions every contraction of a module shares (GemmEmitter.h).
//
// Work items. The product [batch, M, N] of the kernel's GEMM form (kernels/Gemm.h) is cut into
// C blocks of at most MB × NB. One work item computes one block over all of K into a tile in its
// thread's scratch slot and hands the tile to the epilogue, so every block is finished, and
// leaves the cache, exactly once (GemmDriver.cpp). Which thread computes an item never changes
// its result: the output is the same for every thread count. One item, for each KC-deep slice:
//
//     pack B[slice, n block] into panels KC × NR           (GemmKernels.cpp, GemmPack.cpp)
//     pack A[m block, slice] into panels MR × KC          (unless its rows are read in place)
//     for each B panel, for each A panel:
//         micro-kernel: tile[MR × NR] (+)= A panel · B panel
//
// Items run through the M blocks of one N block in turn, and when there are several and B over all
// of K fits kPackedBBudget, it is packed whole (K × NB) and kept in the slot: the next item of the
// same B block skips packing B. Likewise A, when every batch reads the same A (a convolution's
// weights) and M is one block: packed over all of K once per thread (kPackedABudget) and kept
// across the thread's items, unless its rows are read in place (below). Packing converts f16/bf16
// to f32 (i32 to i64) and absorbs transposes, broadcast batches and convolution windows (implicit
// GEMM, padding reads 0). Panels are zero-padded to full MR / NR and to a multiple of the K unroll,
// so the micro-kernel has no edge cases: an edge tile computes rows and columns in the tile's
// padding that the epilogue never reads — except whole vectors of columns: a block's last panel
// runs a micro-kernel of as many vectors of columns as it holds data (a 14 × 14 image's 196 = 6 ·
// 32 + 4 columns end in a 16-column kernel, not a 32-column one). The micro-kernel keeps MR ×
// NR/lanes vector accumulators in registers (explicit vector types, llvm.fmuladd), broadcasts A and
// loads B, and adds into the tile after the first slice. A plain product (GemmDriver.cpp's
// directResult) accumulates its blocks of whole register tiles in the result itself: no tile, no
// copy (6.5 % of 10000×256·512's time; docs/PERFORMANCE.md, after the thirteenth table); on the
// small path, its blocks of whole vectors of columns (64×64·64×32: a third of its time).
//
// Blocking, f32 (f64 and i64 keep the byte sizes: half the elements per vector, NR and NB):
//
//   ISA       MR × NR   accumulators   KC    MB    NB
//   AVX2      6 × 16    12 ymm         256   144   512
//   AVX-512   8 × 48    24 zmm         192   144   512   (f32; f64 and i64: 12 × 16)
//   SSE       4 × 8     8 xmm          256   144   512
//
//   On AVX-512, f32 products whose M 8-row tiles would pad by more than 3 % more than 10- or
//   12-row ones take 10 × 32 or 12 × 32 (tileShape): 100 rows take 10 × 32, 36 rows 12 × 32; a
//   transposed B of up to 64 rows otherwise on 8 × 48 (a small batch's layer, x·Wᵀ) takes 8 × 32.
//   8 × 48 (three vectors of B and 8 broadcasts of A per k, where 12 × 32 loads two and
//   broadcasts 12) was 3–9 % faster on the Xeon with AMX (`kiln_gemm_tune --threads 1 1024 1024
//   1024`, medians, five interleaved rounds: 12 × 32 149.6–155.7 GFLOP/s, 8 × 48 157.7–166.8;
//   2048³ 1T, 10000×512·1000 2T, 1024³ 2T and ABᵀ, a 64-channel convolution 1–10 % faster; Aᵀ·B on
//   two threads 0–5 % slower); simplenet's f32 training step 102.8–105.7 → 99.2–100.8 ms. Plain
//   products, which accumulate in the result (directResult), gained less: `kiln_bench --filter
//   gemm/`, two interleaved pairs, 1024³ 1T 13.7–13.9 → 13.2–13.4 ms, 2048³ and 10000×512·1000 on
//   one or two threads within ±2 %. f32 products of at least 10⁸ FLOPs on AVX-512 take K slices
//   of 336 instead (GemmBlocking.cpp's kF32Kc: fewer trips of the C tiles through the caches).
//
//   - a B panel (KC × NR: 16 KiB on AVX2, 36 KiB on AVX-512; 64 KiB, past L1, in slices of 336)
//     stays in L1 (32-48 KiB) while the micro-kernel runs down all A panels of the block;
//   - the packed A block (MB × KC, 144 KiB) stays in L2 (512 KiB and up) and is read once per B
//     panel;
//   - the tile (MB × NB, 288 KiB) is read and written once per K slice (L2/L3), and is in cache
//     when the epilogue reads it;
//   - packed B (KC × NB = 512 KiB per slice, up to 4 MiB for all of K) streams from L3.
// A is packed ⌈N / NB⌉ times (2·NB flops per packed element); B once per thread and N block.
//
// A in place. Where A's k is contiguous (A of A·B and of A·Bᵀ: a layer's input, an output
// gradient) and A is stored as the accumulators (f32, f64, i64), packing it is a transpose, about a
// cycle per element: an eighth of mnist_mlp's 100×784·784×128. There the micro-kernel reads A's
// rows where they are instead (Blocking::aInPlace): a register tile's MR rows lda apart, the K
// slice's k in steps of kUnroll, then one at a time to its exact depth (B's panel is zero-padded,
// but A past the slice may hold anything). Only a block's last, partial tile of rows is packed:
// rows past M would read past A. `kiln_gemm_tune [--pack-a]`, Emerald Rapids VM, GFLOP/s on 1 / 2
// threads, packed → in place: 100×784·784×128 125–128 / 215–233 → 144–146 / 259–268;
// 10000×512·512×256 139–140 / 288–294 → 145 / 302–313; 1024³ and 2048³ 2–4 % more, the rest the
// same within the VM's noise. Except where more of a tile's MR rows fall into one L1 set than it
// has ways (rowsShareL1Sets; VectorIsa's L1 geometry, the host's from Linux): the micro-kernel
// reads a line of each row in turn, and rows a multiple of 4 KiB apart (1024 or 2048 f32 columns)
// all map to one set. Zen 4's L1 has 8 ways, so 12 rows evicted each other at every step; packed,
// GFLOP/s best (median) on 1 / 2 threads, `kiln_gemm_tune [--pack-a] N N N`: 2048³ 91–95 (73–84) /
// 173–182 (138–158) → 93–101 (88–95) / 184–187 (171–179), 1024³ 90 (79–81) / 169–192 (151–154) →
// 94–100 (90–93) / 181–188 (170–181). 512 columns put 6 rows in each of two sets and stay in place
// (1T 108–110 against 107 packed); so do 8-row tiles in 8 ways (64×1024·1024×1024: 94–97 in place,
// 86–94 packed). Intel's 48 KiB L1 has 12 ways and keeps them in place. An A whose rows are
// contiguous (of Aᵀ·B, a weight gradient) is read in place only where at most four B panels read
// each block, on AVX-512 (Blocking::aColumns: the micro-kernel's k step is lda, its MR rows one
// run): elsewhere a copy into panels streams faster than a line per k from L2 on every pass of a
// B panel (1000×512 over K 10000: 61 → 73 ms in place on 1 thread, 130 → 114 GFLOP/s in an earlier
// try; 784×128 over K 100, three panels: 122–123 → 108–110 µs).
// A convolution's weight gradient reads its output gradient dY[image, channel, row, column] as A:
// channels are rows, and k = (image, row, column) is contiguous only within an image (a run of
// H·W; Blocking::aRun). It is read in place too, with K slices that divide the run (nearest to
// KC, from half of it to a quarter more), so that a slice never crosses into the next image and
// the driver finds its start as run · stride + offset. Before, it went through the map's
// packing routine, a transpose per 16 k. cnn's training step (`kiln explain cnn --train
// --optimizer adam --batch 64 --measure`, three interleaved pairs, Emerald Rapids VM): the first
// convolution's weight gradient (32×9 over K 64·784, slices of 196) 567–593 → 403–426 µs, the
// second's (64×288 over K 64·196) 2049–2092 → 1900–1973 µs. Runs with no such divisor (a stride-2
// convolution's 8×8) stay packed.
//
// Split K. When K is too deep to keep B packed (about 8200 and more for f32 with NB of 128 and
// more), packing B once per item would cost as much as a fifth of the product (the weight
// gradient Aᵀ·B of a large batch). Instead K is split into kSplitsMost parts, and an item
// computes one part for one N block over all of M into the part's partial product (in the
// scratch, under kSplitBudget): B is packed once per slice and reused by every M block. K is also
// split, into parts of at least two slices, when B would be kept packed but M is one block that
// the items split for parallelism: every thread would pack all of B (a first convolution's weight
// gradient; a small batch's layer such as mnist_mlp's 100×784·784×128, whose two threads each
// packed all 400 KB of B), where with parts each packs its part of B and of A. A second
// phase sums the parts in order and hands each MB × NB block to the epilogue (the blocks of the
// M split, so that both threads share this phase too). The parts do not depend on the thread
// count, so neither do the sums.
//
// bf16 on AVX512-BF16. Where the CPU has vdpbf16ps (Cooper Lake, Sapphire Rapids, Zen 4 and 5) and
// it does more flops than the f32 FMAs (support/PeakLoops.h's bf16DotOutrunsFma, timed once per
// process: the Zen 5 machine's twice as many, an Emerald Rapids VM's half as many) or the CPU has
// AMX tiles (GemmAmx.cpp, which take the same pairs), bf16 operands are not converted: the
// strided packings keep them as k pairs, one 32-bit element per panel row and column holding
// k = 2j in its low half and 2j + 1 in its high half, and the
// micro-kernel broadcasts a pair of A and multiplies it with 16 pairs of B per vdpbf16ps, which
// adds both products to each f32 accumulator: twice the multiply-adds of an f32 FMA per
// instruction, half the packed bytes. The panels keep the f32 layout's room (a panel's k pairs fill
// its first half) and the f32 blocking; an odd K's last pair has a zero high half. Operands read
// through convolution windows (GemmPack.cpp) are packed as f32 panels and then rewritten as pairs
// (or A's AMX tiles: emitPairPackFunction); products of at most 8 rows (the small path below)
// still convert to f32; products that fit L1 take the packed path instead of the small one (its
// conversions cost 2.5 times the pair path's time on 64 × 32 × 64).
// VectorIsa::emulateBf16Dot runs the same path with each vdpbf16ps as two FMAs (the same bits) on
// any CPU, for the tests. On CPUs with AMX the path multiplies on tiles instead (GemmAmx.cpp).
//
// Small M. Products of at most 8 rows (batch-1 inference), and products whose B fits L1 with A
// read in place, stream B unpacked (GemmSmall.cpp).
//
// Parallelism: GEMMs under kParallelFlops of work (the product's flops and its fused epilogue's,
// weighed: workOf) run on the calling thread (the grain is the item count, so kiln_parallel_for
// runs them inline). Larger ones split their blocks until there are at least
// 4 items, and an even number below 16, so two threads always both get work.
//
// f64 accumulates in f64 and integers in wrapping i64, with the same blocking and micro-kernel on
// their own vector types.
//
// Compile time. The kernel function of a contraction is a few instructions: it points
// kiln_parallel_for at a shared driver with the kernel's descriptor (its sizes, blocking,
// strides, packing routines and epilogue). The drivers, the micro-kernel (per tile and
// accumulator type) and the packing of strided operands (per operand dtype and contiguous
// dimension, for A and B alike: every matmul operand) are emitted once per module and never
// inlined, so LLVM optimizes and compiles each once however many contractions a program has;
// their calls cost nothing next to the work of a micro-tile or a panel. Only operands read
// through convolution windows get packing routines of their own (GemmPack.cpp).
#include "codegen/cpu/Gemm.h"

#include "codegen/cpu/GemmEmitter.h"
#include "support/Error.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace kiln::cpu {
namespace gemm {
namespace {
DType operandDType(const kernels::Kernel& k) { return k.buffers.at(k.contraction.a).type.dtype; }
}  // namespace

// ---- GemmBuilder ---------------------------------------------------------------------------------

GemmBuilder::GemmBuilder(llvm::Module& module, const std::string& kernelName, const kernels::Kernel& k,
                         const VectorIsa& target)
    : m(module), ctx(module.getContext()), b(ctx), name(kernelName), kernel(k), isa(target), form(kernels::gemmForm(k)),
      acc(accTypeOf(k)), plan(blockingFor(form, acc, target, operandDType(k))), dtype(operandDType(k)),
      pairs(usesBf16Pairs(form, plan, dtype, target)),
      elt(acc == AccType::F32 ? b.getFloatTy() : acc == AccType::F64 ? b.getDoubleTy() : b.getInt64Ty()),
      vec(llvm::FixedVectorType::get(elt, static_cast<unsigned>(plan.lanes))) {}

llvm::Function* GemmBuilder::newFunction(const std::string& part, llvm::FunctionType* type) {
  const std::string full = name + "." + part;
  KILN_CHECK(!m.getFunction(full), "module already defines '{}'", full);
  auto* f = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, full, m);
  f->setDoesNotThrow();
  return f;
}

llvm::Function* GemmBuilder::sharedFunction(const std::string& fullName, llvm::FunctionType* type,
                                            const std::function<void(llvm::Function*)>& build) {
  if (llvm::Function* f = m.getFunction(fullName)) {
    KILN_ASSERT(f->getFunctionType() == type, "shared function '{}' with another type", fullName);
    return f;
  }
  if (isa.linkedGemm && isa.linkedGemm->contains(fullName)) {  // defined by the Jit's prebuilt object
    auto* f = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, fullName, m);
    f->setDoesNotThrow();
    return f;
  }
  auto* f = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, fullName, m);
  f->setDoesNotThrow();
  f->addFnAttr(llvm::Attribute::NoInline);
  llvm::IRBuilderBase::InsertPointGuard guard(b);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
  build(f);
  return f;
}

void GemmBuilder::loop(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label,
                       const std::function<void(llvm::Value*)>& body) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* entry = b.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx, label, f);
  auto* exit = llvm::BasicBlock::Create(ctx, label + ".end", f);
  b.CreateCondBr(b.CreateICmpSLT(begin, end), head, exit);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, label + ".i");
  i->addIncoming(begin, entry);
  body(i);
  llvm::Value* next = b.CreateAdd(i, i64(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, end), head, exit)->setMetadata(llvm::LLVMContext::MD_loop, loopAsWritten());
  b.SetInsertPoint(exit);
}

// The loops here are vectorized and unrolled as written; letting LLVM unroll the packing loops of
// small shapes (whose trip counts are constants) only makes the code bigger and the compile slower.
llvm::MDNode* GemmBuilder::loopAsWritten() {
  llvm::Metadata* unroll = llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  llvm::Metadata* vectorize = llvm::MDNode::get(
      ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b.getFalse())});
  llvm::MDNode* self = llvm::MDNode::getDistinct(ctx, {nullptr, unroll, vectorize});
  self->replaceOperandWith(0, self);
  return self;
}

llvm::Type* GemmBuilder::storageType() {
  switch (dtype) {
    case DType::f32: return b.getFloatTy();
    case DType::f64: return b.getDoubleTy();
    case DType::f16:
    case DType::bf16: return b.getInt16Ty();
    case DType::i32: return b.getInt32Ty();
    case DType::i64: return b.getInt64Ty();
    case DType::boolean: return b.getInt8Ty();
  }
  KILN_ASSERT(false, "dtype {}", dtypeName(dtype));
  return nullptr;
}

llvm::Value* GemmBuilder::toAcc(llvm::Value* v, int lanes) {
  llvm::Type* i32 = withLanes(b.getInt32Ty(), lanes);
  llvm::Type* f32 = withLanes(b.getFloatTy(), lanes);
  auto bits = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::i64: return v;
    case DType::i32: return b.CreateSExt(v, withLanes(elt, lanes));
    case DType::boolean: return b.CreateZExt(v, withLanes(elt, lanes));
    case DType::bf16: return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, i32), bits(16)), f32);
    case DType::f16: {
      if (isa.f16c) return b.CreateFPExt(b.CreateBitCast(v, withLanes(b.getHalfTy(), lanes)), f32);
      // Without F16C (where fpext would become a library call): exponent and mantissa shifted into
      // place are the f32 value 2^112 times too small, subnormals included; infinities and NaNs
      // get the all-ones exponent instead.
      llvm::Value* h = b.CreateZExt(v, i32);
      llvm::Value* sign = b.CreateShl(b.CreateAnd(h, bits(0x8000)), bits(16));
      llvm::Value* magnitude = b.CreateAnd(h, bits(0x7fff));
      llvm::Value* shifted = b.CreateShl(magnitude, bits(13));
      llvm::Value* finite =
          b.CreateBitCast(b.CreateFMul(b.CreateBitCast(shifted, f32), llvm::ConstantFP::get(f32, 0x1p112)), i32);
      llvm::Value* special = b.CreateOr(shifted, bits(0x7f800000));
      llvm::Value* isSpecial = b.CreateICmpUGE(magnitude, bits(0x7c00));
      return b.CreateBitCast(b.CreateOr(b.CreateSelect(isSpecial, special, finite), sign), f32);
    }
  }
  KILN_ASSERT(false, "dtype {}", dtypeName(dtype));
  return nullptr;
}

llvm::Value* GemmBuilder::mulAdd(llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  if (acc == AccType::I64) return b.CreateAdd(b.CreateMul(x, y), z);
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

llvm::Value* GemmBuilder::add(llvm::Value* x, llvm::Value* y) {
  return acc == AccType::I64 ? b.CreateAdd(x, y) : b.CreateFAdd(x, y);
}

llvm::Value* GemmBuilder::sumLanes(llvm::Value* v) {
  // Halving: the upper half added to the lower one until one lane is left (the order does not
  // depend on anything but the lane count).
  for (int n = plan.lanes / 2; n >= 1; n /= 2) {
    std::vector<int> low, high;
    for (int i = 0; i < n; ++i) low.push_back(i), high.push_back(i + n);
    v = add(b.CreateShuffleVector(v, low), b.CreateShuffleVector(v, high));
  }
  return b.CreateExtractElement(v, uint64_t{0});
}

std::string GemmBuilder::typeTag() {
  std::string tag = fmt::format("{}.v{}", dtypeName(dtype), plan.lanes);
  if (dtype == DType::f16 && !isa.f16c) tag += ".nof16c";
  if (pairs) tag += ".pairs";
  return tag;
}

namespace {

/// Emits the kernel function of one contraction and its descriptor (see the file comment).
class GemmEmitter {
 public:
  GemmEmitter(llvm::Module& m, const std::string& name, const kernels::Kernel& k, const VectorIsa& isa)
      : g_(m, name, k, isa), b_(g_.b) {}

  llvm::Function* emit(llvm::Function* epilogue) {
    llvm::Function* kernel =
        llvm::Function::Create(kernelFunctionType(g_.ctx), llvm::GlobalValue::ExternalLinkage, g_.name, g_.m);
    kernel->setDoesNotThrow();
    if (g_.plan.items == 0) {
      b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", kernel));
      b_.CreateRetVoid();
      return kernel;
    }
    std::array<llvm::Function*, 2> phases{};  // the second, if any, runs after the first
    switch (g_.plan.path) {
      case Path::Packed: phases[0] = packedDriver(g_); break;
      case Path::SplitK: phases = splitDrivers(g_); break;
      case Path::Small: phases[0] = smallDriver(g_); break;
    }
    llvm::Constant* descriptor = describe(epilogue);
    b_.SetInsertPoint(llvm::BasicBlock::Create(g_.ctx, "entry", kernel));
    llvm::Value* bufs = kernel->getArg(0);
    llvm::Value* scratch = b_.CreateAlignedLoad(
        b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), bufs, g_.kernel.buffers.size()), llvm::Align(8));
    // The slot counter and every claim flag (GemmDriver.cpp) start at zero.
    b_.CreateAlignedStore(g_.i64(0), scratch, llvm::Align(8));
    b_.CreateMemSet(b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), scratch, kScratchHeaderBytes), b_.getInt8(0),
                    g_.plan.claimsBytes(), llvm::MaybeAlign(8));
    llvm::Value* ctx = b_.CreateAlloca(llvm::ArrayType::get(b_.getPtrTy(), 2), nullptr, "ctx");
    b_.CreateAlignedStore(bufs, ctx, llvm::Align(8));
    b_.CreateAlignedStore(descriptor, b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), ctx, 1), llvm::Align(8));
    for (size_t phase = 0; phase < 2 && phases[phase]; ++phase) {
      const int64_t items = phase == 0 ? g_.plan.items : g_.plan.reduceItems;
      if (g_.plan.parallel())
        b_.CreateCall(declareParallelFor(g_.m),
                      {kernel->getArg(1), g_.i64(0), g_.i64(items),
                       g_.i64(g_.plan.awakeOnly ? -g_.plan.grain : g_.plan.grain), phases[phase], ctx});
      else
        b_.CreateCall(phases[phase], {ctx, g_.i64(0), g_.i64(items)});
    }
    b_.CreateRetVoid();
    return kernel;
  }

 private:
  /// The fields of operand A (`a`) or B in `fields` from `at` on: its strides and batch
  /// coefficients when strided, its buffer otherwise.
  void describeOperand(std::vector<int64_t>& fields, int at, bool a) {
    const kernels::GemmOperand& op = a ? g_.form.a : g_.form.b;
    fields[static_cast<size_t>(at + desc::Buffer)] = op.buffer;
    std::optional<Strides> s = sharedStrides(g_.form, a);
    // A read in place in runs of k: strided within a run (the driver adds the runs' offsets); its
    // packing routine, for a block's last rows, is the map's own.
    if (a && g_.plan.aRun > 0) s = Strides{aRunsOf(g_.form)->row, 1};
    if (!s) return;
    auto set = [&](int field, int64_t v) { fields[static_cast<size_t>(at + field)] = v; };
    set(desc::Ld, s->rowsContiguous() ? s->k : s->row);
    set(desc::Width, a ? g_.plan.mr : g_.plan.nr);
    set(desc::RowStride, s->row);
    set(desc::KStride, s->k);
    set(desc::Constant, op.map.index.constant);
    const std::vector<int64_t>& dims = g_.form.batchDims;
    const int first = desc::kMaxBatchRank - static_cast<int>(dims.size());  // right-aligned
    for (int d = 0; d < desc::kMaxBatchRank; ++d) {
      const bool real = d >= first;
      set(desc::Sizes + d, real ? dims[static_cast<size_t>(d - first)] : 1);
      set(desc::Coeffs + d, real ? op.map.index.coeff[static_cast<size_t>(d - first)] : 0);
    }
    set(desc::Rank, static_cast<int64_t>(dims.size()));
  }

  /// The kernel's descriptor, an internal constant NAME.desc.
  llvm::Constant* describe(llvm::Function* epilogue) {
    const Blocking& p = g_.plan;
    const kernels::GemmForm& f = g_.form;
    std::vector<int64_t> fields(desc::Count, 0);
    auto set = [&](int field, int64_t v) { fields[static_cast<size_t>(field)] = v; };
    set(desc::Items, p.items), set(desc::MBlocks, p.mBlocks), set(desc::NBlocks, p.nBlocks);
    set(desc::Mb, p.mb), set(desc::Nb, p.nb), set(desc::M, f.m), set(desc::N, f.n), set(desc::K, f.k);
    set(desc::Kc, p.kc), set(desc::KBlocks, p.kBlocks), set(desc::ReuseB, p.reuseB), set(desc::ReuseA, p.reuseA);
    set(desc::Ldt, p.ldt);
    set(desc::SlotBytes, p.slotBytes()), set(desc::PackBBytes, p.packBBytes), set(desc::PackABytes, p.packABytes);
    set(desc::Groups, f.groups), set(desc::ScratchIndex, static_cast<int64_t>(g_.kernel.buffers.size()));
    set(desc::ElementBytes, static_cast<int64_t>(g_.storageType()->getPrimitiveSizeInBits() / 8));
    set(desc::SlotsOffset, p.slotsOffset(f.batch)), set(desc::Splits, p.splits), set(desc::SliceBlocks, p.sliceBlocks);
    set(desc::PartialBytes, p.partialBytes), set(desc::ReduceItems, p.reduceItems);
    set(desc::Direct, directResult(g_)), set(desc::AInPlace, p.aInPlace);
    set(desc::ARun, p.aRun), set(desc::ARunStride, p.aRunStride), set(desc::EpiloguePanels, p.epiloguePanels);
    describeOperand(fields, desc::A, true);
    describeOperand(fields, desc::B, false);
    std::vector<llvm::Constant*> pointers(desc::Pointers, llvm::ConstantPointerNull::get(b_.getPtrTy()));
    pointers[desc::Epilogue] = epilogue;
    if (p.path == Path::Small) {
      const std::vector<int> groups = smallRowGroups(f.m, g_.isa.avx512);
      const bool inPlace = smallAInPlace(f, g_.dtype);
      set(desc::KPad, roundUp(f.k, p.lanes)), set(desc::AInPlace, inPlace);
      set(desc::Group0, groups[0]), set(desc::Group1, groups.size() > 1 ? groups[1] : 0);
      pointers[desc::Kernel0] = smallKernelFunction(g_, groups[0]);
      if (groups.size() > 1) pointers[desc::Kernel1] = smallKernelFunction(g_, groups[1]);
      if (!inPlace) pointers[desc::PackRows] = smallRowsFunction(g_);
      if (smallConvertsB(f)) pointers[desc::ConvertB] = stridedPackFunction(g_, false);
    } else {
      for (bool a : {true, false}) {
        const std::optional<Strides> s = sharedStrides(f, a);
        pointers[a ? desc::PackA : desc::PackB] = s        ? stridedPackFunction(g_, s->rowsContiguous(), a && p.amx)
                                                  : g_.pairs ? emitPairPackFunction(g_, a)
                                                             : emitPackFunction(g_, a);
      }
    }
    std::vector<llvm::Constant*> values;
    for (int64_t v : fields) values.push_back(llvm::ConstantInt::get(b_.getInt64Ty(), static_cast<uint64_t>(v)));
    llvm::StructType* type = desc::type(g_.ctx);
    llvm::Constant* init = llvm::ConstantStruct::get(
        type, {llvm::ConstantArray::get(llvm::cast<llvm::ArrayType>(type->getElementType(0)), values),
               llvm::ConstantArray::get(llvm::cast<llvm::ArrayType>(type->getElementType(1)), pointers)});
    auto* global = new llvm::GlobalVariable(g_.m, type, /*isConstant=*/true, llvm::GlobalValue::InternalLinkage, init,
                                            g_.name + ".desc");
    global->setAlignment(llvm::Align(8));
    return global;
  }

  GemmBuilder g_;
  llvm::IRBuilder<>& b_;
};

}  // namespace
}  // namespace gemm

AccType accTypeOf(const kernels::Kernel& k) {
  switch (gemm::operandDType(k)) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return AccType::F32;
    case DType::f64: return AccType::F64;
    default: return AccType::I64;
  }
}

int64_t contractionScratchBytes(const kernels::Kernel& k, const VectorIsa& isa, int threads) {
  const gemm::Blocking p = gemm::blockingFor(kernels::gemmForm(k), accTypeOf(k), isa, gemm::operandDType(k));
  if (p.items == 0) return 0;
  return p.slotsOffset(kernels::gemmForm(k).batch) + (p.parallel() ? std::max(threads, 1) : 1) * p.slotBytes();
}

bool contractionUsesBf16Pairs(const kernels::Kernel& k, const VectorIsa& isa) {
  const kernels::GemmForm f = kernels::gemmForm(k);
  const DType dtype = gemm::operandDType(k);
  return gemm::usesBf16Pairs(f, gemm::blockingFor(f, accTypeOf(k), isa, dtype), dtype, isa);
}

bool contractionUsesAmx(const kernels::Kernel& k, const VectorIsa& isa) {
  return gemm::blockingFor(kernels::gemmForm(k), accTypeOf(k), isa, gemm::operandDType(k)).amx;
}

llvm::Function* pointEpilogue(llvm::Module& m, const std::string& name, AccType acc, int64_t resultM, int64_t resultN,
                              const std::vector<size_t>& buffers, const EpiloguePoint& point) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = b.getPtrTy();
  llvm::Type* elt = acc == AccType::F32 ? b.getFloatTy() : acc == AccType::F64 ? b.getDoubleTy() : i64;
  auto* f =
      llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64, i64, i64, i64, i64, i64}, false),
                             llvm::Function::InternalLinkage, name, m);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* rows = llvm::BasicBlock::Create(ctx, "rows", f);
  auto* cols = llvm::BasicBlock::Create(ctx, "cols", f);
  auto* rowEnd = llvm::BasicBlock::Create(ctx, "rows.next", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  llvm::Value *tile = f->getArg(1), *ldt = f->getArg(2), *batch = f->getArg(3);
  llvm::Value *m0 = f->getArg(4), *m1 = f->getArg(5), *n0 = f->getArg(6), *n1 = f->getArg(7);
  // for (m = m0; m < m1; ++m) for (n = n0; n < n1; ++n); blocks are never empty.
  b.SetInsertPoint(entry);
  std::vector<llvm::Value*> pointers;
  for (size_t i : buffers) pointers.push_back(b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, f->getArg(0), i)));
  b.CreateBr(rows);
  b.SetInsertPoint(rows);
  llvm::PHINode* row = b.CreatePHI(i64, 2);
  row->addIncoming(m0, entry);
  b.CreateBr(cols);
  b.SetInsertPoint(cols);
  llvm::PHINode* col = b.CreatePHI(i64, 2);
  col->addIncoming(n0, rows);
  llvm::Value* from = b.CreateAdd(b.CreateMul(b.CreateSub(row, m0), ldt), b.CreateSub(col, n0));
  llvm::Value* to =
      b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(batch, b.getInt64(resultM)), row), b.getInt64(resultN)), col);
  point(b, pointers, b.CreateGEP(elt, tile, from), to);
  llvm::Value* nextCol = b.CreateAdd(col, b.getInt64(1));
  col->addIncoming(nextCol, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(nextCol, n1), cols, rowEnd);
  b.SetInsertPoint(rowEnd);
  llvm::Value* nextRow = b.CreateAdd(row, b.getInt64(1));
  row->addIncoming(nextRow, rowEnd);
  b.CreateCondBr(b.CreateICmpSLT(nextRow, m1), rows, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return f;
}

llvm::Function* emitContraction(llvm::Module& m, const std::string& name, const kernels::Kernel& k,
                                llvm::Function* epilogue, const VectorIsa& isa) {
  return gemm::GemmEmitter(m, name, k, isa).emit(epilogue);
}

}  // namespace kiln::cpu
