// The calling convention of generated CPU kernels, shared by the renderer (Render.cpp), the GEMM
// emitter (Gemm.cpp), the op-kernel emitter (RenderOps.cpp) and the program runtime.
//
// Every kernel of a program is one LLVM function
//
//     void NAME(void** bufs, void* pool)
//
// where bufs[i] is the base address of kernels::Kernel::buffers[i] (row-major, the buffer's dtype;
// bool is one byte 0/1, f16/bf16 are their 16-bit patterns), followed by the kernel's scratch
// areas (scratchBytes below), and `pool` is the kiln::rt::ThreadPool* handed to kiln_parallel_for
// (null: the global pool). A kernel splits its own work across the pool; it never throws.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

namespace llvm {
class Function;
class FunctionType;
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::kernels {
struct Kernel;
}

namespace kiln::cpu {

class Jit;

/// What the generated code may use: the widest float vectors and the instruction-set features
/// that change kernel shapes. Derived from the Jit's target (so `JitOptions::cpu` is honoured).
struct VectorIsa {
  int f32Lanes = 4;  // 16 with AVX-512, 8 with AVX2, 4 otherwise
  bool fma = false;
  bool f16c = false;        // vcvtph2ps: f16 → f32 in one instruction (else integer operations)
  bool avx512 = false;      // avx512f (+bw, vl, dq assumed together on every CPU that has them)
  bool avx512bf16 = false;  // vdpbf16ps
  bool amx = false;         // amx-tile + amx-bf16, and (for the host) the kernel's permission to use them
  // bf16 products on the k-pair path pay on this CPU: it multiplies them on AMX tiles, or its
  // vdpbf16ps does more flops than its f32 FMAs (support/PeakLoops.h's bf16DotOutrunsFma, measured
  // for the host; assumed for a named CPU); else bf16 products convert to f32.
  bool bf16DotPays = true;
  // The bf16 GEMM's k-pair path (GemmEmitter.h's usesBf16Pairs) on an ISA without vdpbf16ps, each
  // of its dot products done as two FMAs (the same bits: bf16 products are exact in f32). Set only
  // by tests, to run that path's packing and micro-kernel on any machine (JitOptions::emulateBf16Dot).
  bool emulateBf16Dot = false;
  // The k-pair path on AMX tiles (GemmAmx.cpp) with each tile product done by vector code from the
  // same packed panels. Set only by tests, to run that path's packing on any AVX-512 machine
  // (JitOptions::emulateAmx).
  bool emulateAmx = false;
  // The level-1 data cache: sets × ways lines of l1Line bytes. The host's as Linux reports it; for
  // a named CPU 64 sets of 12 ways of 64 B where it has 48 KiB (Intel's since Ice Lake, Zen 5), else
  // (and where Linux does not say) of 8 ways, the smallest associativity of x86 L1d caches in use.
  // Decides whether the GEMM may read A's rows in place (GemmBlocking.cpp's rowsShareL1Sets).
  int l1Sets = 64, l1Ways = 8, l1Line = 64;

  /// vdpbf16ps on vectors of 16 floats: bf16 products on the GEMM's k-pair path, natively.
  bool bf16Dot() const { return avx512bf16 && avx512 && bf16DotPays; }
  /// The k-pair path multiplies on AMX tiles (tdpbf16ps), natively or emulated.
  bool amxTiles() const { return avx512 && (amx || emulateAmx); }
  // Limits of the packed GEMM's blocking (Gemm.cpp's blockingFor: the K slice and the rows and
  // columns of a C block); 0 takes the ISA's own. Set only to tune them (kiln_gemm_tune --kc, --mb,
  // --nb, --sweep), never by isaOf. gemmMr and gemmNr replace the register tile's rows and columns
  // (kiln_gemm_tune --mr, --nr; NR a multiple of the vector lanes).
  int64_t gemmKc = 0, gemmMb = 0, gemmNb = 0;
  int gemmMr = 0, gemmNr = 0;
  // Packs A into panels even where its rows could be read in place (Blocking::aInPlace): set only
  // to compare the two (kiln_gemm_tune --pack-a), never by isaOf.
  bool gemmPackA = false;
  // The shared GEMM routines (GemmEmitter.h's sharedFunction) that the module links against
  // instead of defining them: the Jit's prebuilt ones (Jit::prebuiltGemm, PrebuiltGemm.h). Null:
  // the module defines every routine it calls. Set by cpu::Program for the JIT, never by isaOf.
  const std::unordered_set<std::string>* linkedGemm = nullptr;
};

VectorIsa isaOf(const Jit& jit);

/// `void (void**, void*)`, the type of every kernel function.
llvm::FunctionType* kernelFunctionType(llvm::LLVMContext& ctx);

/// The declaration of the runtime's `kiln_parallel_for(void* pool, i64 begin, i64 end, i64 grain,
/// void (*fn)(void* ctx, i64 b, i64 e), void* ctx)` in `m` (runtime/ThreadPool.h).
llvm::Function* declareParallelFor(llvm::Module& m);

}  // namespace kiln::cpu
