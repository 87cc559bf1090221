// Internal to the GEMM emitter: the blocking of one contraction and the IR-building state its
// parts share. Gemm.cpp: the design, the kernel function and its descriptor; GemmBlocking.cpp:
// the blocking (blockingFor); GemmDriver.cpp: the work items; GemmKernels.cpp: the micro-kernel and
// the packing of strided operands; GemmPack.cpp: the packing of any other operand through its index
// map; GemmSmall.cpp: the small-M path that streams B unpacked. All but GemmPack.cpp's routines and the kernel function
// are shared by every contraction of a module.
#pragma once

#include "codegen/cpu/Gemm.h"
#include "kernels/Gemm.h"

#include <llvm/IR/IRBuilder.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu::gemm {

constexpr int kUnroll = 4;                   // K steps per micro-kernel loop iteration
constexpr int kAmxRows = 32, kAmxK = 32;     // AMX: the register tile's rows (two tiles), k per tile product
constexpr int kAmxKc = 576;                  // AMX: the deepest K slice (GemmBlocking.cpp)
constexpr int64_t kScratchHeaderBytes = 64;  // the scratch's header: the slot counter
constexpr int64_t kSlotHeaderBytes = 64;     // per-thread slot header: which blocks its packed operands hold
constexpr int64_t kSlotTagB = 0, kSlotTagA = 1;  // the header's words: the block of B, of A it holds (or -1)

/// How an item computes its block (see Gemm.cpp's and GemmSmall.cpp's file comments).
enum class Path : uint8_t {
  Packed,  // packed panels and the register-blocked micro-kernel
  SplitK,  // the same, K too deep to keep B packed: K split into partial products, then summed
  Small,   // M <= kSmallM, or all in L1 (GemmSmall.cpp): B streamed as it is, never packed
};

/// The blocking of one contraction for one ISA (see Gemm.cpp's file comment).
struct Blocking {
  Path path = Path::Packed;
  int lanes = 0;           // accumulator elements per vector
  int mr = 0, nr = 0;      // register tile; nr is a multiple of lanes
  int64_t kc = 0;          // K slice, a multiple of kUnit (0 when K is 0)
  // AMX tiles (GemmAmx.cpp): MR kAmxRows, NR 32, K slices padded to kAmxK; A packed in tile rows.
  bool amx = false;
  int kUnit = kUnroll;     // a K slice's padding unit: the micro-kernel's k per loop iteration
  int64_t kBlocks = 1;     // slices (at least one, so an empty K still writes zero tiles)
  int64_t mb = 0, nb = 0;  // C block, multiples of mr and nr
  int64_t mBlocks = 0, nBlocks = 0, items = 0;
  int64_t grain = 1;    // kiln_parallel_for grain; `items` keeps the GEMM on one thread
  // Split only among workers already awake (kiln_parallel_for's negative grain: a parked worker
  // costs the caller a wake-up longer than the product; GemmSmall.cpp's kSmallAwakeBytes).
  bool awakeOnly = false;
  bool reuseB = false;  // B is packed for all of K and reused by the next items of its block
  bool reuseA = false;  // A, the same for every batch in one M block, is packed for all of K once per slot
  bool aInPlace = false;  // A's whole register tiles of rows read in place, only its last, partial one packed
  // With aInPlace: A's rows contiguous and its k lda apart (Aᵀ·B's A), read so by the micro-kernel
  // (a register tile's rows at one k are one run of MR elements, as in a packed panel).
  bool aColumns = false;
  // A read in place whose k is contiguous in runs of aRun, aRunStride apart (the output gradient
  // of a convolution's weight gradient: k = image, row, column); K slices never cross a run.
  // 0 where A's k is contiguous over all of K.
  int64_t aRun = 0, aRunStride = 0;
  // Packed path: the epilogue takes a block's tile this many panels of columns at a time, each
  // group as soon as the last K slice has finished it; 0: the whole tile after its last panel.
  int64_t epiloguePanels = 0;
  int64_t packBBytes = 0, packABytes = 0, tileBytes = 0;
  int64_t ldt = 0;  // row stride of the result tile, in elements
  // SplitK: `splits` parts of `sliceBlocks` K slices each, every part's product over all of M × N
  // in its partial (ldt × roundUp(M, MR) elements, partialBytes apart, per batch and part) after
  // the scratch header; then reduceItems blocks of MB × NB summed and handed to the epilogue.
  int64_t splits = 1, sliceBlocks = 0, partialBytes = 0, reduceItems = 0;

  int64_t slotBytes() const { return kSlotHeaderBytes + packBBytes + packABytes + tileBytes; }
  /// Bytes of the claim flags after the scratch's header: one byte per item of each phase, each
  /// phase's rounded to 64 (claimsBytes in GemmDriver.cpp computes the same from the descriptor).
  int64_t claimsBytes() const { return (items + 63) / 64 * 64 + (reduceItems + 63) / 64 * 64; }
  /// Bytes from the scratch to the first slot: the header, the claim flags and, for SplitK, the
  /// partials.
  int64_t slotsOffset(int64_t batch) const {
    return kScratchHeaderBytes + claimsBytes() + splits * batch * partialBytes;
  }
  bool parallel() const { return items >= 2 * grain; }
};

/// The blocking of contraction `f` of `dtype` operands (the dtype matters only for bf16: see
/// usesBf16Pairs).
Blocking blockingFor(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa, DType dtype = DType::f32);
/// The packed path's register tile MR × NR for an ISA and accumulator type.
std::array<int, 2> registerTile(const VectorIsa& isa, AccType acc);
/// Whether contraction `f` of `dtype` operands with blocking `plan` packs them as bf16 k pairs for
/// the dot-product micro-kernel (or AMX tiles): bf16 on an ISA with vdpbf16ps (or
/// VectorIsa::emulateBf16Dot), the packed and SplitK paths; strided operands are packed by the
/// shared routines, others (convolution windows) by emitPairPackFunction.
bool usesBf16Pairs(const kernels::GemmForm& f, const Blocking& plan, DType dtype, const VectorIsa& isa);

/// Accumulator elements from one packed panel of `width` rows and kcPad k to the next: the
/// panel and a vector of `lanes` of slack, which the strided packing's whole-vector stores may
/// spill into (GemmKernels.cpp).
inline int64_t panelElements(int64_t kcPad, int width, int lanes) { return kcPad * width + lanes; }
/// Bytes of `slices` packed slices of `rows` rows (a multiple of `width`) and `kc` k, 64-byte
/// aligned.
int64_t packedBytes(int64_t slices, int64_t rows, int width, int64_t kc, int bytes, int lanes);

inline int accBytes(AccType acc) { return acc == AccType::F32 ? 4 : 8; }
/// 2 · batch · M · N · K: the flops of the product.
double flopsOf(const kernels::GemmForm& f);
/// The product's flops and its epilogue's, an epilogue flop weighing kEpilogueFlopWeight of the
/// micro-kernel's: elementwise code of loads, stores, square roots and divides does about an
/// eighth of the FMAs' flops per cycle (mnist_mlp's batch-8 weight gradient with Adam fused, 128 ×
/// 784 over K 8: 1.3 M epilogue flops in about 84 µs, 15 GFLOP/s, beside the product's 120 on one
/// thread).
double workOf(const kernels::GemmForm& f);
constexpr double kEpilogueFlopWeight = 8;
/// Contractions of less work run on the calling thread (≈ 30 µs of work), on every path.
constexpr double kParallelFlops = 2.0 * (1 << 20);
int64_t ceilDiv(int64_t a, int64_t b);
int64_t roundUp(int64_t a, int64_t b);
int64_t align64(int64_t bytes);

// An operand's strides (row, k) and a coordinate group's stride: kernels/Gemm.h.
using kernels::groupStride;
using kernels::Strides;
using kernels::stridesOf;

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
  const DType dtype;           // of both operands
  // bf16 operands packed as k pairs for the dot-product micro-kernel (vdpbf16ps; usesBf16Pairs):
  // a panel's row jj holds k = 2·jj (low half) and 2·jj + 1 (high half) of each of its rows in one
  // 32-bit element, so a panel of kcPad k takes kcPad / 2 rows of the f32 panel's room.
  const bool pairs;
  llvm::Type* elt;             // the accumulator type
  llvm::FixedVectorType* vec;  // plan.lanes of it

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
  llvm::Align storeAlign() { return llvm::Align(storageType()->getPrimitiveSizeInBits() / 8); }
  /// Element `offset` (in elements of `type`) from `base`.
  llvm::Value* at(llvm::Type* type, llvm::Value* base, llvm::Value* offset) {
    return b.CreateInBoundsGEP(type, base, offset);
  }

  /// A new internal function NAME.part of the module.
  llvm::Function* newFunction(const std::string& part, llvm::FunctionType* type);
  /// The module's internal function `fullName`, shared by every contraction that needs it: built
  /// by `build` (with the builder on its entry block; the insertion point is restored afterwards)
  /// the first time, looked up afterwards. Shared functions are never inlined, so LLVM optimizes
  /// and compiles each once per module. A routine in isa.linkedGemm is only declared: the Jit
  /// links the module against its prebuilt object (PrebuiltGemm.h), compiled once with kiln.
  llvm::Function* sharedFunction(const std::string& fullName, llvm::FunctionType* type,
                                 const std::function<void(llvm::Function*)>& build);

  /// `for (i = begin; i < end; i += step) body(i)` on i64; the builder continues after the loop.
  void loop(llvm::Value* begin, llvm::Value* end, int64_t step, const std::string& label,
            const std::function<void(llvm::Value*)>& body);
  /// Loop metadata that keeps LLVM from unrolling or vectorizing a loop (see Gemm.cpp).
  llvm::MDNode* loopAsWritten();

  /// The type an operand element is stored as (f16 and bf16 as their bit patterns).
  llvm::Type* storageType();
  /// Stored operand elements (a scalar or a vector of `lanes`) converted to the accumulator type.
  llvm::Value* toAcc(llvm::Value* v, int lanes);
  /// x·y + z on accumulator values (fused where the target has FMA; wrapping for integers).
  llvm::Value* mulAdd(llvm::Value* x, llvm::Value* y, llvm::Value* z);
  llvm::Value* add(llvm::Value* x, llvm::Value* y);
  /// The sum of the lanes of an accumulator vector, in a fixed order.
  llvm::Value* sumLanes(llvm::Value* v);

  /// A name part that tells the operand dtype, accumulator lanes, f16 conversion and bf16 pairs apart.
  std::string typeTag();
};

/// first, first + 1, … (`count` values): shuffle masks.
std::vector<int> iota(int first, int count);
/// Stores one AMX step of A's panel at `step` (StridedPacker::amxAt's layout: 32 rows of 16 k
/// pairs, one row after the other) from its 16 pair rows (`pairRows[j]`: pair j of each of the 32
/// rows, 32 × i32), transposing them 16 × 16 pairs at a time. Every load of the rows comes before the
/// stores, so the step may overwrite what they were read from.
void storeAmxStep(GemmBuilder& g, const std::vector<llvm::Value*>& pairRows, llvm::Value* step);
/// The transpose of a square matrix held as `rows` vectors of as many lanes (Eklundh's algorithm:
/// one two-input shuffle per row and step).
std::vector<llvm::Value*> transposeSquare(llvm::IRBuilder<>& b, std::vector<llvm::Value*> rows);
/// The lanes of x followed by those of y (y no longer than x).
llvm::Value* concatVectors(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);

// ---- The contraction descriptor ----------------------------------------------------------------
//
// Every contraction kernel is a constant descriptor of the module and a call of a shared driver
// (GemmDriver.cpp) that reads it: `{[desc::Count x i64], [desc::Pointers x ptr]}`.
namespace desc {

constexpr int kMaxBatchRank = 4;  // batch coordinates a strided operand may have

/// The fields of a strided operand (stridesOf), at desc::A or desc::B: element (r, k) of batch b
/// lies at bufs[Buffer] + (Constant + Σ_d coord_d(b) · Coeffs[d] + r · RowStride + k · KStride)
/// elements, where coord_d(b) are b's coordinates over Sizes (the batch dimensions right-aligned,
/// size 1 and coefficient 0 before them); Ld is the stride that is not 1, Rank the form's batch
/// rank (0: the offset is Constant), Width the operand's panel width (MR or NR).
constexpr int Buffer = 0, Ld = 1, RowStride = 2, KStride = 3, Constant = 4, Rank = 5, Width = 6, Sizes = 7,
              Coeffs = Sizes + kMaxBatchRank, OperandFields = Coeffs + kMaxBatchRank;

/// The i64 fields: the blocking (Blocking), the sizes of the GEMM form, where the scratch is in
/// the buffer table, and the operands' fields (desc::A, desc::B).
constexpr int Items = 0, MBlocks = 1, NBlocks = 2, Mb = 3, Nb = 4, M = 5, N = 6, K = 7, Kc = 8, KBlocks = 9,
              ReuseB = 10, Ldt = 11, SlotBytes = 12, PackBBytes = 13, PackABytes = 14, Groups = 15,
              ScratchIndex = 16, ElementBytes = 17,               // of an operand element as stored
              KPad = 18, Group0 = 20, Group1 = 21,  // small path: A's rows, row groups
              AInPlace = 19,  // A read in place (small path: in rows; packed paths: Blocking::aInPlace)
              SlotsOffset = 22, Splits = 23, SliceBlocks = 24, PartialBytes = 25, ReduceItems = 26,
              ReuseA = 27, Direct = 28,  // the result's buffer + 1 when blocks may go straight into it
              ARun = 29, ARunStride = 30,  // Blocking::aRun, aRunStride
              EpiloguePanels = 31,         // Blocking::epiloguePanels
              A = 32, B = A + OperandFields, Count = B + OperandFields;

/// Functions the drivers call: the packing routines of A and B (packed path), the row-group
/// kernels, A's conversion into rows and B's into a panel (small path), and the kernel's epilogue.
enum Pointer : int { PackA, PackB, Kernel0 = PackA, Kernel1 = PackB, PackRows, ConvertB, Epilogue, Pointers };

llvm::StructType* type(llvm::LLVMContext& ctx);
/// The address of i64 field `field` (or operand field `field` of the operand at `operand`).
llvm::Value* field(llvm::IRBuilder<>& b, llvm::Value* desc, int field);
llvm::Value* load(llvm::IRBuilder<>& b, llvm::Value* desc, int field);
llvm::Value* pointer(llvm::IRBuilder<>& b, llvm::Value* desc, Pointer p);

}  // namespace desc

/// Whether operand A (`a`) or B is strided with at most kMaxBatchRank batch coordinates, i.e. is
/// packed by the shared strided routines and may take the small path.
std::optional<Strides> sharedStrides(const kernels::GemmForm& f, bool a);

/// A with no bounds or quotients, its rows one stride apart (`row`) and its k contiguous only in
/// runs of `run` (the inner k dimensions, stride 1) that lie `runStride` apart (over the outer
/// ones): a convolution's weight gradient reads its output gradient so, k = (image, row,
/// column), a run per image. Nothing for other operands, and where A's k is contiguous throughout.
struct ARuns {
  int64_t run = 0, runStride = 0, row = 0;
};
std::optional<ARuns> aRunsOf(const kernels::GemmForm& f);

/// The signature of every packing routine:
///
///     void pack(void** bufs, const i64* operand, i64 b, i64 offset, i64 r0, i64 rows, i64 k0, i64 kc,
///               i64 kcPad, ACC* dst)
///
/// packs rows [r0, r0 + rows) (the m coordinates of A, the n coordinates of B) and k in
/// [k0, k0 + kc) of batch b into panels of MR (NR) rows: panel p at dst + p·panelElements(kcPad,
/// width, lanes), element (kk, r) of a panel at kk·width + r, zero where a row, a k or the map's
/// bounds are out of range.
/// `operand` points at the operand's descriptor fields and `offset` is batch b's offset
/// (batchOffset): routines of strided operands use these, map routines b.
llvm::FunctionType* packFunctionType(llvm::LLVMContext& ctx);

/// The micro-kernel, shared per module (GemmKernels.cpp):
///
///     void ukernel(i64 kc, const ACC* a, const ACC* b, ACC* c, i64 ldc, i1 accumulate)
///
/// c[MR × NR] (row stride ldc) = (accumulate ? c : 0) + A panel · B panel over kc steps (a
/// multiple of kUnroll). With `vectors` (1 … NR / lanes − 1), a narrow kernel for a panel's first
/// vectors · lanes columns only (the last panel of a block, short of columns: 196 = 6 · 32 + 4
/// takes a 16-column kernel for its last panel); it leaves c's other columns as they are.
///
/// With `aRows`, A is read in place instead of from a panel (Blocking::aInPlace): row i of the
/// register tile at a + i · lda, an argument after `accumulate`, and kc any depth. On AMX tiles a
/// last argument points at the register tile's last kc mod kAmxK k packed as one step's two tiles
/// (read only when kc is not a multiple of kAmxK; a + i · lda is in A's elements as stored).
///
/// With `halfRows` (native AMX tiles only), a kernel for a panel's first 16 rows: one tile of rows.
///
/// With `aColumns` (and `aRows`; f32 kernels only), A read in place with its rows contiguous
/// (Blocking::aColumns): element (i, k) at a + k · lda + i.
llvm::Function* microKernel(GemmBuilder& g, int vectors = 0, bool aRows = false, bool halfRows = false,
                            bool aColumns = false);
/// The micro-kernel for a panel whose first `columns` (an i64) hold data: the narrowest whose
/// vectors cover them; with `rows` (an i64: the panel's rows that hold data) on native AMX tiles,
/// the one-tile kernels where they are at most 16.
llvm::Value* panelKernel(GemmBuilder& g, llvm::Value* columns, bool aRows = false, llvm::Value* rows = nullptr,
                         bool aColumns = false);
/// The name part that tells the micro-kernels (and so the drivers that call them) apart beyond
/// their tile: "" for the FMA kernel, ".bf16dot" or ".bf16dot.emulated" for bf16 pairs.
std::string microKernelTag(GemmBuilder& g);

/// The packing routine of strided operands whose rows (or k) are contiguous, shared per module
/// (GemmKernels.cpp).
/// With `amxA`, operand A's panels in AMX tile rows instead (Blocking::amx).
llvm::Function* stridedPackFunction(GemmBuilder& g, bool rowsContiguous, bool amxA = false);
/// The body of the micro-kernel on AMX tiles (GemmAmx.cpp), the first `mi` (1 or 2) tiles of rows
/// and `nv` (1 or 2) of columns, with microKernel's arguments and results (`aRows`: A's rows in
/// place); the tiles configured by amxConfigure.
void emitAmxMicroKernel(GemmBuilder& g, llvm::Function* f, int nv, bool aRows, int mi);
/// The tile configuration of the AMX micro-kernel (ldtilecfg), and its release (tilerelease).
void amxConfigure(GemmBuilder& g);
void amxRelease(GemmBuilder& g);
/// Whether the AMX path's micro-kernel uses the tiles (else VectorIsa::emulateAmx: the vector
/// micro-kernel reads A's tile rows).
inline bool nativeAmx(const GemmBuilder& g) { return g.plan.amx && g.isa.amx && !g.isa.emulateAmx; }

/// The element offset of batch `batch` of the strided operand whose fields are at `operand`
/// (Constant + Σ coord · Coeffs).
llvm::Value* batchOffset(GemmBuilder& g, llvm::Value* operand, llvm::Value* batch);

/// The packing routine of operand A (`a`) or B of this kernel through its index map
/// (GemmPack.cpp), for operands that are not strided.
llvm::Function* emitPackFunction(GemmBuilder& g, bool a);
/// The same on the k-pair path (GemmBuilder::pairs): panels of k pairs, each pair row made from two
/// rows in registers — or, for A on AMX tiles, the tiles of StridedPacker::amxAt: each row's k
/// copied into its tile row where A has no bounds and its rows are not contiguous (a weight
/// gradient's output gradient, an input gradient's flipped weights), else the f32 panels of
/// emitPackFunction (exact bf16 values), each then rewritten in place. How convolution windows take
/// the pair path and the tiles.
llvm::Function* emitPairPackFunction(GemmBuilder& g, bool a);

/// The shared drivers (GemmDriver.cpp): `void chunk(const {void** bufs, const Desc* desc}* ctx,
/// i64, i64)` for kiln_parallel_for, which claims a scratch slot, then work items until none are
/// left, for the packed path and for the small path.
llvm::Function* packedDriver(GemmBuilder& g);
/// desc::Direct: the result's buffer + 1 where the packed driver may accumulate blocks of whole
/// register tiles straight in it, and the small driver write blocks of whole vectors of columns
/// (the epilogue only stores the product, in the accumulator's type, row-major — the result-level
/// view [batch, M, N] of a matmul, a batched one or an ungrouped convolution — into a buffer that
/// is no operand), skipping the tile and the epilogue's copy; else 0.
int64_t directResult(const GemmBuilder& g);
/// Whether the kernel's result may take its blocks straight (desc::Direct), and where batch
/// `batch`'s [M, N] starts in the result's buffer (in buffer 0's when not: never written).
std::pair<llvm::Value*, llvm::Value*> directTarget(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d,
                                                   llvm::Value* batch);
/// Calls the kernel's epilogue on rows [m0, m0 + rows) and columns [n0, n0 + cols) of batch
/// `batch`'s block, held in `tile` (desc::Ldt apart).
void callEpilogue(GemmBuilder& g, llvm::Value* bufs, llvm::Value* d, llvm::Value* tile, llvm::Value* batch,
                  llvm::Value* m0, llvm::Value* rows, llvm::Value* n0, llvm::Value* cols);
llvm::Function* smallDriver(GemmBuilder& g);
/// `void item(void** bufs, const Desc* d, i8* slot, i64 item)` of the small path (GemmSmall.cpp).
void emitSmallItem(GemmBuilder& g, llvm::Function* f);
/// The two phases of the SplitK path: the partial products, then their sums and the epilogue.
std::array<llvm::Function*, 2> splitDrivers(GemmBuilder& g);

/// Small-M path (GemmSmall.cpp): whether contraction `f` takes it, its blocking, the kernels of
/// its row groups (desc::Kernel0, Kernel1: `void(const ACC* a, i64 lda, i64 ka, const T* b, i64 ldb, i64 k,
/// i64 cols, ACC* tile, i64 ldt)`), its row conversion of A (desc::PackRows) and its groups: the
/// first group's size, repeated up to the last group, which ends at the last row and may overlap
/// the one before (desc::Group0, Group1; Group1 is 0 when every group is the first's size).
/// (`bf16Pairs`: bf16 operands the packed path would multiply as k pairs, which skip the L1 rule.)
bool takesSmallPath(const kernels::GemmForm& f, bool bf16Pairs = false);
/// Whether the small path converts B (its k contiguous) into one panel of K rows per item first, to
/// run the axpy kernels over it: products of more than kSmallM rows (the L1 rule).
bool smallConvertsB(const kernels::GemmForm& f);
Blocking smallBlocking(const kernels::GemmForm& f, AccType acc, const VectorIsa& isa);
std::vector<int> smallRowGroups(int64_t m, bool wideRegisters);
bool smallAInPlace(const kernels::GemmForm& f, DType dtype);
llvm::Function* smallKernelFunction(GemmBuilder& g, int rows);
llvm::Function* smallRowsFunction(GemmBuilder& g);

}  // namespace kiln::cpu::gemm
