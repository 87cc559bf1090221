// kiln::cpu::Jit — compiles LLVM modules to machine code for this CPU and hands back function
// addresses. It wraps ORC's LLJIT: every module is verified, optimized with the new pass manager's
// O3 pipeline for the target machine (so the vectorizers see the real CPU, its features and the
// preferred vector width) or a light one for IR that is vectorized already, optionally dumped (IR
// before and after, assembly), then linked into its own JITDylib. Compiled modules are cached by a
// hash of their IR (as bitcode) and pipeline.
//
// The header names llvm::Module and llvm::LLVMContext only as incomplete types, so code outside
// codegen/cpu can hold a Jit and call compiled functions without LLVM headers; only the renderer,
// which builds the modules, includes LLVM.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::cpu {

/// What machine code a Jit produces. The defaults describe the host.
struct JitOptions {
  /// LLVM CPU name ("znver3", "skylake-avx512", "x86-64"); empty: the host CPU with its features.
  /// Naming a CPU compiles for that CPU's default features — useful to inspect the code for
  /// another machine; calling it on a CPU without those features is undefined.
  std::string cpu;
  /// Extra LLVM feature string ("+avx2,-avx512f") applied on top of the CPU's features.
  std::string features;
  /// Threads that generate the code of one large module in parallel (it is split into parts of
  /// similar size; see ModuleSplit.h). 0: the hardware's threads, at most 8.
  int compileThreads = 0;
  /// Link programs against the shared GEMM routines kiln was built with (PrebuiltGemm.h) when
  /// they fit this target, instead of compiling them into every module.
  bool prebuiltGemm = true;
  /// A folder that keeps compiled modules across processes: a module compiled before — the same
  /// IR and pipeline for the same triple, CPU, features, LLVM version and prebuilt GEMM routines —
  /// is loaded from there (one object file per module) instead of compiled. An unreadable or
  /// damaged entry is compiled again and replaced; a folder that cannot be written only goes
  /// unused. Empty: modules are cached in memory only. Jit::host() takes $KILN_CACHE_DIR/cpu when
  /// KILN_CACHE_DIR is set.
  std::string cacheDir;
  /// Programs take the bf16 GEMM's k-pair path with each vdpbf16ps emulated by two FMAs
  /// (VectorIsa::emulateBf16Dot), so tests can run that path on CPUs without AVX512-BF16.
  bool emulateBf16Dot = false;
  /// Programs on the k-pair path multiply on emulated AMX tiles (VectorIsa::emulateAmx): the AMX
  /// packing and blocking with vector code for the tile products, on any AVX-512 CPU.
  bool emulateAmx = false;
};

/// Per-module choices.
struct CompileOptions {
  /// The widest vectors (bits) the vectorizers should prefer: becomes the "prefer-vector-width"
  /// attribute of every function that does not set it. 0: the Jit's default (512 on AVX-512
  /// targets, 256 otherwise). Explicit vector types in the IR are compiled as written regardless.
  int preferVectorWidth = 0;
  /// The optimization pipeline. Full: the new pass manager's O3 (loop and SLP vectorizers,
  /// unrolling), for any IR. Light: for IR that is vectorized and unrolled as written, such as
  /// kiln's kernels: inlining, scalar replacement, CSE, instruction combining, loop-invariant code
  /// motion, GVN and full unrolling of loops with constant trip counts — a fifth of O3's time.
  enum class Pipeline : uint8_t { Full, Light };
  Pipeline pipeline = Pipeline::Full;
  /// When both are set, writes DUMPDIR/STEM.ll (the input IR with the triple, data layout and
  /// vector-width attribute, i.e. what is hashed), STEM.opt.ll (after optimization) and
  /// STEM.s (the assembly). The directory is created if needed. A cache hit writes them too.
  std::string dumpDir;
  std::string dumpStem;
};

/// One compiled module: the addresses of the functions and globals it defines. Owned by the Jit
/// (and its cache); the addresses stay valid for the lifetime of the Jit that made it.
class CompiledModule {
 public:
  /// The address of the defined, externally visible symbol `name`. Throws kiln::Error naming the
  /// module and the symbols it does define when there is no such symbol.
  void* address(std::string_view name) const;
  /// address() cast to a function pointer type, e.g. `fn<float(float, float)>("add")`.
  template <typename Signature>
  Signature* fn(std::string_view name) const {
    return reinterpret_cast<Signature*>(address(name));
  }

  const std::string& name() const { return name_; }
  /// The cache key: a 64-bit hash of the IR as given plus the options that change the code.
  std::uint64_t hash() const { return hash_; }
  /// Wall time of the cold compile (verify, optimize, generate code, link), excluding dumps; of
  /// reading and linking the objects when they came from the disk cache.
  double compileMs() const { return compileMs_; }
  /// Whether the code was loaded from JitOptions::cacheDir rather than compiled.
  bool fromDisk() const { return fromDisk_; }
  /// Defined symbol names in sorted order.
  std::vector<std::string> symbols() const;
  /// The parts it was compiled in parallel as (1: compiled whole).
  int parts() const { return parts_; }

 private:
  friend class Jit;
  std::string name_;
  std::uint64_t hash_ = 0;
  double compileMs_ = 0;
  int parts_ = 1;
  bool fromDisk_ = false;
  std::map<std::string, void*, std::less<>> addresses_;
};

/// Counters over the life of a Jit.
struct JitStats {
  int compiles = 0;   // cold compiles
  int cacheHits = 0;  // compile() calls answered from the cache in memory
  int diskHits = 0;   // compile() calls answered from JitOptions::cacheDir (loaded and linked, not compiled)
  double compileMs = 0;  // sum of the cold compile times
};

/// An LLJIT for one target machine with a compile cache. Not thread-safe: modules are built in
/// the Jit's one LLVMContext, so build and compile them from one thread at a time. The compiled
/// functions may be called from any thread.
class Jit {
 public:
  /// Throws kiln::Error when LLVM has no target for this process or does not know options.cpu.
  explicit Jit(const JitOptions& options = {});
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  /// The process-wide Jit for the host, created on first use.
  static Jit& host();

  /// The context modules given to compile() must be created in.
  llvm::LLVMContext& context();

  /// Verifies, optimizes and compiles `module` (which must live in context()), or returns the
  /// cached result for identical IR and options without compiling. Throws kiln::Error with LLVM's
  /// message when the module is invalid ("module 'NAME' fails the LLVM verifier: …"), calls an
  /// undefined symbol, or fails to compile; the Jit stays usable afterwards.
  std::shared_ptr<const CompiledModule> compile(std::unique_ptr<llvm::Module> module,
                                                const CompileOptions& options = {});

  /// Verifies, prepares and optimizes `module` exactly as compile() does, then emits it as an ELF
  /// relocatable object (position-independent, for a shared library) instead of linking it into
  /// the process: ahead-of-time compilation (aot/). Not cached. Dumps as compile() does. Throws
  /// kiln::Error as compile() does.
  std::string emitObject(std::unique_ptr<llvm::Module> module, const CompileOptions& options = {});

  /// Makes a host-process symbol callable from generated code by name (e.g. a runtime helper
  /// that the executable does not export dynamically). Affects modules compiled afterwards.
  /// Defining a name again with the same address is a no-op; with another address, an Error.
  void defineSymbol(const std::string& name, const void* address);

  /// The shared GEMM routines prebuilt for this target (PrebuiltGemm.h), which modules may declare
  /// and call (VectorIsa::linkedGemm): the first call links their object into the Jit. Null when
  /// kiln has none for this vector ISA or CPU, or JitOptions::prebuiltGemm is off.
  const std::unordered_set<std::string>* prebuiltGemm();
  /// The LLVM CPU the prebuilt routines were compiled for ("x86-64-v3"); empty when there are none.
  std::string prebuiltGemmCpu() const;

  /// The target triple, CPU name and LLVM feature string the code is generated for.
  const std::string& triple() const;
  const std::string& cpu() const;
  const std::string& features() const;
  /// Whether the target has the named LLVM feature ("avx2", "avx512f", "fma").
  bool hasFeature(std::string_view feature) const;
  /// JitOptions::emulateBf16Dot, JitOptions::emulateAmx.
  bool emulatesBf16Dot() const;
  bool emulatesAmx() const;
  /// Whether the code is for the machine this process runs on (JitOptions::cpu empty).
  bool targetsHost() const;
  /// The preferred vector width used when CompileOptions::preferVectorWidth is 0.
  int defaultPreferVectorWidth() const;

  JitStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
