#include "codegen/cpu/Jit.h"

#include "codegen/cpu/KernelAbi.h"
#include "codegen/cpu/ModuleSplit.h"
#include "codegen/cpu/PerfMap.h"
#include "codegen/cpu/PrebuiltGemm.h"
#include "support/Error.h"
#include "support/File.h"
#include "support/Parallel.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Support/xxhash.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <mutex>
#include <type_traits>
#include <unordered_set>

namespace kiln::cpu {
namespace {

using Clock = std::chrono::steady_clock;

/// The smallest part worth a thread of its own: below it, reading the bitcode and setting up the
/// passes cost more than the thread saves.
constexpr int64_t kMinPartInstructions = 200;
/// Parts per thread: more parts balance the threads better, each costs a little.
constexpr int kPartsPerThread = 4;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// LLVM's messages end with a newline (the verifier's with several); kiln's do not.
std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string message(llvm::Error err) { return trimmed(llvm::toString(std::move(err))); }

template <typename T>
T unwrap(llvm::Expected<T> value, std::string_view what) {
  if (!value) KILN_THROW("{}: {}", what, message(value.takeError()));
  if constexpr (std::is_reference_v<T>)
    return *value;
  else
    return std::move(*value);
}

std::string printModule(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return text;
}

/// The module's bitcode: hashed for the cache key, and what the parts of a split compile read.
std::string bitcodeOf(const llvm::Module& m) {
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(m, os);
  return bitcode;
}

std::uint64_t hashOf(const std::string& bitcode) {
  return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(bitcode.data()), bitcode.size()));
}

/// Loop strength reduction is a quarter of the code generator's time on kiln's modules (its
/// induction-variable analysis walks every address of the unrolled loops) and buys them nothing:
/// the renderer writes loops with one induction variable and the addressing folded already
/// (callgrind: the same instruction count per training step of every zoo model with and without
/// it). LLVM offers it as a process-wide switch only, so every Jit of the process (and `kiln aot`'s
/// objects) compiles without it.
void disableLoopStrengthReduction() {
  auto& options = llvm::cl::getRegisteredOptions();
  if (auto it = options.find("disable-lsr"); it != options.end())
    if (auto* flag = static_cast<llvm::cl::opt<bool>*>(it->second); flag->getNumOccurrences() == 0) flag->setValue(true);
}

void initializeLlvmTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    disableLoopStrengthReduction();
  });
}

/// The target machine description for `options`, validated so that an unknown CPU or feature is
/// a kiln::Error instead of LLVM's "ignoring processor" warning on stderr.
llvm::orc::JITTargetMachineBuilder targetFor(const JitOptions& options) {
  llvm::orc::JITTargetMachineBuilder jtmb(llvm::Triple(llvm::sys::getProcessTriple()));
  if (options.cpu.empty())
    jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "cannot describe the host CPU");
  const std::string triple = jtmb.getTargetTriple().str();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  KILN_CHECK(target, "LLVM has no code generator for target '{}': {}", triple, err);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
  if (!options.cpu.empty()) {
    KILN_CHECK(sti->isCPUStringValid(options.cpu), "unsupported CPU '{}' for target '{}'",
               options.cpu, triple);
    jtmb.setCPU(options.cpu);
  }
  for (llvm::StringRef feature : llvm::split(options.features, ',')) {
    feature = feature.trim();
    if (feature.empty()) continue;
    llvm::StringRef bare = feature.ltrim("+-");
    bool known = llvm::any_of(sti->getAllProcessorFeatures(),
                              [&](const llvm::SubtargetFeatureKV& kv) { return bare == kv.Key; });
    KILN_CHECK(known, "unknown CPU feature '{}' for target '{}'", bare.str(), triple);
    jtmb.getFeatures().AddFeature(feature);
  }
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // The settings LLJIT picks for JITLink on x86-64 ELF; fixing them here makes the dumped
  // assembly match the code that runs.
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.setCodeModel(llvm::CodeModel::Small);
  return jtmb;
}

constexpr char kCacheMagic[8] = {'K', 'I', 'L', 'N', 'J', 'I', 'T', '2'};

/// The objects of a disk cache entry (JitOptions::cacheDir): the magic, the check hash, the
/// object count, each object's size and bytes, sealed (sealCacheEntry). Nothing when the file is
/// missing, unreadable, damaged (its bytes do not match their hash: a damaged object would be
/// linked and run) or for other IR (its check hash differs).
std::optional<std::vector<std::string>> readCachedObjects(const std::string& path, std::uint64_t check) {
  std::optional<std::string> unsealed = unsealCacheEntry(readCacheFile(path));
  if (!unsealed) return std::nullopt;
  const std::string& bytes = *unsealed;
  size_t at = 0;
  auto take = [&](void* to, size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(to, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[8];
  std::uint64_t stored = 0;
  std::uint32_t count = 0;
  if (!take(magic, 8) || std::memcmp(magic, kCacheMagic, 8) != 0 || !take(&stored, 8) || stored != check ||
      !take(&count, 4) || count == 0)
    return std::nullopt;
  std::vector<std::string> objects;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint64_t size = 0;
    if (!take(&size, 8) || bytes.size() - at < size || !looksLikeElf64(std::string_view(bytes).substr(at, size)))
      return std::nullopt;
    objects.push_back(bytes.substr(at, size));
    at += size;
  }
  if (at != bytes.size()) return std::nullopt;
  return objects;
}

/// Writes a disk cache entry (a folder that cannot be written leaves the cache unused).
void writeCachedObjects(const std::string& path, std::uint64_t check, const std::vector<std::string>& objects) {
  std::string bytes(kCacheMagic, 8);
  auto put = [&](const void* from, size_t n) { bytes.append(static_cast<const char*>(from), n); };
  put(&check, 8);
  const auto count = static_cast<std::uint32_t>(objects.size());
  put(&count, 4);
  for (const std::string& o : objects) {
    const std::uint64_t size = o.size();
    put(&size, 8);
    bytes += o;
  }
  writeCacheFile(path, sealCacheEntry(std::move(bytes)));
}

}  // namespace

void* CompiledModule::address(std::string_view name) const {
  auto it = addresses_.find(name);
  if (it == addresses_.end()) {
    auto defined = symbols();
    KILN_THROW("module '{}' defines no symbol '{}' (it defines: {})", name_, name,
               defined.empty() ? "nothing" : fmt::format("{}", fmt::join(defined, ", ")));
  }
  return it->second;
}

std::vector<std::string> CompiledModule::symbols() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : addresses_) names.push_back(name);
  return names;
}

struct Jit::Impl {
  std::string triple, cpu, features;
  std::unique_ptr<llvm::TargetMachine> tm;  // optimization and assembly dumps
  llvm::orc::ThreadSafeContext context{std::make_unique<llvm::LLVMContext>()};
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  int defaultWidth = 256;
  int dylibCount = 0;  // makes JITDylib names unique
  // Errors ORC reports out of band (e.g. "Symbols not found") while a compile() runs.
  std::vector<std::string> sessionErrors;
  std::map<std::uint64_t, std::shared_ptr<CompiledModule>> cache;
  std::map<std::string, const void*> hostSymbols;
  JitStats stats;
  // The prebuilt GEMM routines for this target, if any; their object joins the main JITDylib
  // (which every module's JITDylib searches first) on the first prebuiltGemm() call.
  const PrebuiltGemm* prebuilt = nullptr;
  std::unordered_set<std::string> prebuiltNames;
  bool prebuiltLinked = false;
  // The disk cache (JitOptions::cacheDir) and what its keys cover besides a module's IR: the
  // target, LLVM's version and the prebuilt routines a module may call.
  std::string cacheDir;
  std::uint64_t targetKey = 0;
  bool emulateBf16Dot = false, emulateAmx = false, targetsHost = true;

  void prepare(llvm::Module& m, int preferWidth, CompileOptions::Pipeline pipeline) const;
  void optimize(llvm::Module& m, CompileOptions::Pipeline pipeline, llvm::TargetMachine& machine) const;
  void optimize(llvm::Module& m, CompileOptions::Pipeline pipeline) const { optimize(m, pipeline, *tm); }
  std::string emit(const llvm::Module& m, llvm::CodeGenFileType type) const;
  std::string emitObject(llvm::Module& m, llvm::TargetMachine& machine) const;
  std::string assembly(const llvm::Module& m) const;
  /// verify + prepare; returns the module's name. Throws kiln::Error for an invalid module.
  std::string check(llvm::Module& m, const CompileOptions& options);
  void writeDumps(const std::string& before, const llvm::Module& optimized,
                  const CompileOptions& options) const;
  std::shared_ptr<CompiledModule> link(const std::string& name, const std::vector<std::string>& names,
                                       const std::function<llvm::Error(llvm::orc::JITDylib&)>& add);
  /// Target machines of the parallel code generation, one per thread, made on first use.
  std::optional<llvm::orc::JITTargetMachineBuilder> builder;
  std::vector<std::unique_ptr<llvm::TargetMachine>> workerMachines;
  int compileThreads = 1;
  llvm::TargetMachine& worker(size_t i);
  std::vector<std::string> compileParts(const std::string& name, const std::string& bitcode, const SplitPlan& plan,
                                        CompileOptions::Pipeline pipeline);
};

/// Gives the module the JIT's triple and data layout, and every defined function the preferred
/// vector width unless it has its own. Light modules also do without the branch around 64-bit
/// divisions that checks whether 32 bits would do (x86's "idivq-to-divl"): it doubles the blocks
/// of the setup code that divides by sizes, and it is never in a hot loop of a kiln kernel.
void Jit::Impl::prepare(llvm::Module& m, int preferWidth, CompileOptions::Pipeline pipeline) const {
  m.setTargetTriple(triple);
  m.setDataLayout(tm->createDataLayout());
  const std::string width = std::to_string(preferWidth);
  const bool light = pipeline == CompileOptions::Pipeline::Light && llvm::Triple(triple).isX86();
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    if (!f.hasFnAttribute("prefer-vector-width")) f.addFnAttr("prefer-vector-width", width);
    if (light && !f.hasFnAttribute("target-features"))
      f.addFnAttr("target-features", features.empty() ? "-idivq-to-divl" : features + ",-idivq-to-divl");
  }
}

void Jit::Impl::optimize(llvm::Module& m, CompileOptions::Pipeline pipeline, llvm::TargetMachine& machine) const {
  // The analysis managers must be declared in this order (the proxies refer across them).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  if (pipeline == CompileOptions::Pipeline::Full) {
    builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
    return;
  }
  // Most of O3's time goes to passes that find what vectorized IR states already (vectorizers,
  // unrolling, induction-variable rewriting, loop unswitching); these are the ones that shrink it.
  // instcombine as the O pipelines run it: a textual `instcombine` checks that one iteration
  // reaches a fixpoint and aborts the process when not (LLVM 18 and later), as a prefetch of a
  // packing routine's region once made it.
  llvm::ModulePassManager mpm;
  const char* light =
      "cgscc(inline),function(sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),"
      "gvn,instcombine<no-verify-fixpoint>,simplifycfg,loop(loop-unroll-full))";
  if (auto err = builder.parsePassPipeline(mpm, light)) KILN_THROW("light pipeline: {}", message(std::move(err)));
  mpm.run(m, mam);
}

std::string Jit::Impl::emit(const llvm::Module& m, llvm::CodeGenFileType type) const {
  // Code generation rewrites the module it runs on, so it gets a copy.
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(m);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager passes;
  KILN_CHECK(!tm->addPassesToEmitFile(passes, os, nullptr, type), "LLVM cannot emit {} for target '{}'",
             type == llvm::CodeGenFileType::ObjectFile ? "an object file" : "assembly", triple);
  passes.run(*copy);
  return std::string(text.str());
}

std::string Jit::Impl::emitObject(llvm::Module& m, llvm::TargetMachine& machine) const {
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager passes;
  KILN_CHECK(!machine.addPassesToEmitFile(passes, os, nullptr, llvm::CodeGenFileType::ObjectFile),
             "LLVM cannot emit an object file for target '{}'", triple);
  passes.run(m);
  return std::string(object.str());
}

std::string Jit::Impl::assembly(const llvm::Module& m) const { return emit(m, llvm::CodeGenFileType::AssemblyFile); }

/// Writes STEM.ll (`before`: the input with target attributes), STEM.opt.ll and STEM.s (from `optimized`).
void Jit::Impl::writeDumps(const std::string& before, const llvm::Module& optimized,
                           const CompileOptions& options) const {
  std::error_code ec;
  std::filesystem::create_directories(options.dumpDir, ec);
  KILN_CHECK(!ec, "cannot create dump directory '{}': {}", options.dumpDir, ec.message());
  const std::string stem = (std::filesystem::path(options.dumpDir) / options.dumpStem).string();
  writeFileAtomically(stem + ".ll", before);
  writeFileAtomically(stem + ".opt.ll", printModule(optimized));
  writeFileAtomically(stem + ".s", assembly(optimized));
}

/// The names a compiled module exposes: its defined, non-local, non-intrinsic globals.
static std::vector<std::string> exportedNames(const llvm::Module& m) {
  std::vector<std::string> names;
  for (const llvm::GlobalValue& gv : m.global_values())
    if (!gv.isDeclaration() && !gv.hasLocalLinkage() && !gv.getName().starts_with("llvm."))
      names.push_back(gv.getName().str());
  return names;
}

/// Adds code (`add`: the optimized module, or the objects of its parts) to a JITDylib of its own
/// (so modules may reuse function names) and materializes every symbol in `names` now, so code
/// generation counts in the compile time and its errors surface here rather than at the first call.
std::shared_ptr<CompiledModule> Jit::Impl::link(const std::string& name, const std::vector<std::string>& names,
                                                const std::function<llvm::Error(llvm::orc::JITDylib&)>& add) {
  sessionErrors.clear();
  auto compiled = std::make_shared<CompiledModule>();
  compiled->name_ = name;
  const std::string dylibName = fmt::format("{}#{}", compiled->name_, dylibCount++);
  llvm::orc::JITDylib& dylib = unwrap(lljit->createJITDylib(dylibName), "cannot create JITDylib");
  llvm::orc::JITDylibSearchOrder order{{&lljit->getMainJITDylib(),
                                        llvm::orc::JITDylibLookupFlags::MatchAllSymbols}};
  for (const auto& link : lljit->defaultLinkOrder()) order.push_back(link);
  dylib.setLinkOrder(std::move(order));

  auto fail = [&](llvm::Error err) {
    std::string why = message(std::move(err));
    for (const std::string& e : sessionErrors) why = e + "; " + why;
    sessionErrors.clear();
    llvm::consumeError(lljit->getExecutionSession().removeJITDylib(dylib));
    KILN_THROW("cannot compile module '{}': {}", compiled->name_, why);
  };
  if (auto err = add(dylib)) fail(std::move(err));
  for (const std::string& symbol : names) {
    auto addr = lljit->lookup(dylib, symbol);
    if (!addr) fail(addr.takeError());
    else compiled->addresses_[symbol] = addr->toPtr<void*>();
  }
  return compiled;
}

llvm::TargetMachine& Jit::Impl::worker(size_t i) {
  while (workerMachines.size() <= i)
    workerMachines.push_back(unwrap(builder->createTargetMachine(), "cannot create the LLVM target machine"));
  return *workerMachines[i];
}

/// Optimizes and generates the parts on up to compileThreads threads (this one among them), each
/// part in an LLVMContext of its own; the parts come largest first and each thread takes the next
/// one when it is done, which evens out what their sizes do not predict. Returns the object files
/// in part order; rethrows the first failure.
std::vector<std::string> Jit::Impl::compileParts(const std::string& name, const std::string& bitcode,
                                                  const SplitPlan& plan, CompileOptions::Pipeline pipeline) {
  const size_t parts = plan.instructions.size();
  const size_t threadCount = std::min(parts, static_cast<size_t>(compileThreads));
  for (size_t t = 0; t < threadCount; ++t) worker(t);  // made here: making them is not thread-safe
  std::vector<std::string> objects(parts);
  forEachItem(parts, threadCount, [&](size_t i, size_t t) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = loadPart(llvm::MemoryBufferRef(bitcode, name), plan, static_cast<int>(i), ctx);
    optimize(*m, pipeline, *workerMachines[t]);
    objects[i] = emitObject(*m, *workerMachines[t]);
  });
  return objects;
}

Jit::Jit(const JitOptions& options) : impl_(std::make_unique<Impl>()) {
  initializeLlvmTarget();
  Impl& I = *impl_;
  llvm::orc::JITTargetMachineBuilder jtmb = targetFor(options);
  I.triple = jtmb.getTargetTriple().str();
  I.cpu = jtmb.getCPU();
  I.features = jtmb.getFeatures().getString();
  I.emulateBf16Dot = options.emulateBf16Dot;  // before isaOf(*this) below
  I.emulateAmx = options.emulateAmx;
  I.targetsHost = options.cpu.empty();
  I.tm = unwrap(jtmb.createTargetMachine(), "cannot create the LLVM target machine");
  I.builder = jtmb;
  I.compileThreads = options.compileThreads > 0 ? options.compileThreads : static_cast<int>(compileThreadLimit());
  I.defaultWidth = hasFeature("avx512f") ? 512 : 256;
  I.lljit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
                   "cannot create the LLVM JIT");
  if (perfMapWanted()) addPerfMap(*I.lljit);
  I.lljit->getExecutionSession().setErrorReporter(
      [&I](llvm::Error err) { I.sessionErrors.push_back(message(std::move(err))); });
  if (options.prebuiltGemm) {
    const std::string key = isaKey(isaOf(*this));
    for (const PrebuiltGemm& p : prebuiltGemmTable()) {
      bool fits = key == p.isaKey;
      for (llvm::StringRef f : llvm::split(llvm::StringRef(p.features), ','))
        fits = fits && (f.empty() || hasFeature(f));
      if (!fits) continue;
      I.prebuilt = &p;
      for (llvm::StringRef name : llvm::split(llvm::StringRef(p.names), '\n'))
        if (!name.empty()) I.prebuiltNames.insert(name.str());
      break;
    }
  }
  I.cacheDir = options.cacheDir;
  std::string target = fmt::format("{}|{}|{}|LLVM {}|", I.triple, I.cpu, I.features, LLVM_VERSION_STRING);
  if (I.prebuilt) {
    target += I.prebuilt->cpu;
    target += std::to_string(llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(I.prebuilt->object, I.prebuilt->objectBytes)));
  }
  I.targetKey = hashOf(target);
}

Jit::~Jit() = default;

Jit& Jit::host() {
  static Jit jit([] {
    JitOptions options;
    options.cacheDir = codeCacheDir("cpu");
    return options;
  }());
  return jit;
}

llvm::LLVMContext& Jit::context() { return *impl_->context.getContext(); }

std::shared_ptr<const CompiledModule> Jit::compile(std::unique_ptr<llvm::Module> module,
                                                   const CompileOptions& options) {
  Impl& I = *impl_;
  KILN_CHECK(module, "Jit::compile: no module");
  const bool dump = !options.dumpDir.empty() && !options.dumpStem.empty();

  const auto start = Clock::now();
  I.check(*module, options);
  // The key hashes the bitcode (a sixth of the time the IR text takes); the text is for dumps.
  const std::string bitcode = bitcodeOf(*module);
  const std::uint64_t hash = hashOf(bitcode) ^ static_cast<std::uint64_t>(options.pipeline);
  const std::string before = dump ? printModule(*module) : std::string();

  if (auto hit = I.cache.find(hash); hit != I.cache.end()) {
    ++I.stats.cacheHits;
    if (dump) {
      I.optimize(*module, options.pipeline);
      I.writeDumps(before, *module, options);
    }
    return hit->second;
  }

  const std::string name = module->getModuleIdentifier();
  const std::vector<std::string> names = exportedNames(*module);
  // The disk cache (JitOptions::cacheDir): the file is named by the key, and holds a second hash
  // of everything the key covers, which a hit must match.
  std::string diskPath;
  std::uint64_t check = 0;
  if (!dump && !I.cacheDir.empty()) {
    diskPath = (std::filesystem::path(I.cacheDir) / fmt::format("{:016x}.kjit", hash ^ I.targetKey)).string();
    check = llvm::xxHash64(bitcode) ^ (I.targetKey * 31) ^ static_cast<std::uint64_t>(options.pipeline);
  }
  // What is linked: the objects of the module's parts (compiled here, or read from the disk
  // cache), or, when empty, the optimized module itself.
  std::vector<std::string> objects;
  auto linkObjects = [&] {
    std::shared_ptr<CompiledModule> linked = I.link(name, names, [&](llvm::orc::JITDylib& dylib) -> llvm::Error {
      for (size_t i = 0; i < objects.size(); ++i)
        if (auto err = I.lljit->addObjectFile(
                dylib, llvm::MemoryBuffer::getMemBufferCopy(objects[i], fmt::format("{}.part{}", name, i))))
          return err;
      return llvm::Error::success();
    });
    linked->parts_ = static_cast<int>(objects.size());
    return linked;
  };
  std::shared_ptr<CompiledModule> compiled;
  if (!diskPath.empty()) {
    if (std::optional<std::vector<std::string>> cached = readCachedObjects(diskPath, check)) {
      objects = std::move(*cached);
      try {
        compiled = linkObjects();
      } catch (const Error&) {  // an entry that does not link is compiled again and replaced
        objects.clear();
      }
    }
  }
  const bool fromDisk = compiled != nullptr;
  double dumpMs = 0;
  if (!fromDisk) {
    // Dumps show the whole optimized module, so a dumping compile does not split it (the code of
    // each function is the same either way).
    SplitPlan plan;
    if (!dump && I.compileThreads > 1) plan = planSplit(*module, I.compileThreads * kPartsPerThread, kMinPartInstructions);
    if (plan.instructions.empty()) {
      I.optimize(*module, options.pipeline);
      if (dump) {
        const auto dumpStart = Clock::now();
        I.writeDumps(before, *module, options);
        dumpMs = msSince(dumpStart);
      }
      if (!diskPath.empty()) objects.push_back(I.emitObject(*module, *I.tm));
    } else {
      module.reset();
      objects = I.compileParts(name, bitcode, plan, options.pipeline);
    }
    if (!diskPath.empty()) writeCachedObjects(diskPath, check, objects);
    if (objects.empty()) {
      compiled = I.link(name, names, [&](llvm::orc::JITDylib& dylib) {
        return I.lljit->addIRModule(dylib, llvm::orc::ThreadSafeModule(std::move(module), I.context));
      });
    } else {
      compiled = linkObjects();
    }
  }
  compiled->hash_ = hash;
  compiled->compileMs_ = msSince(start) - dumpMs;
  compiled->fromDisk_ = fromDisk;
  if (fromDisk) {
    ++I.stats.diskHits;
  } else {
    ++I.stats.compiles;
    I.stats.compileMs += compiled->compileMs_;
  }
  I.cache.emplace(hash, compiled);
  return compiled;
}

std::string Jit::Impl::check(llvm::Module& m, const CompileOptions& options) {
  const std::string name = m.getModuleIdentifier();
  KILN_CHECK(&m.getContext() == context.getContext(),
             "module '{}' was not created in the Jit's LLVMContext (Jit::context())", name);
  const int width = options.preferVectorWidth ? options.preferVectorWidth : defaultWidth;
  KILN_CHECK(width == 128 || width == 256 || width == 512,
             "preferred vector width {} for module '{}': expected 128, 256 or 512", width, name);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(m, &os)) KILN_THROW("module '{}' fails the LLVM verifier: {}", name, trimmed(problems));
  prepare(m, width, options.pipeline);
  return name;
}

std::string Jit::emitObject(std::unique_ptr<llvm::Module> module, const CompileOptions& options) {
  Impl& I = *impl_;
  KILN_CHECK(module, "Jit::emitObject: no module");
  I.check(*module, options);
  const bool dump = !options.dumpDir.empty() && !options.dumpStem.empty();
  const std::string before = dump ? printModule(*module) : std::string();
  I.optimize(*module, options.pipeline);
  if (dump) I.writeDumps(before, *module, options);
  return I.emit(*module, llvm::CodeGenFileType::ObjectFile);
}

const std::unordered_set<std::string>* Jit::prebuiltGemm() {
  Impl& I = *impl_;
  if (!I.prebuilt) return nullptr;
  if (!I.prebuiltLinked) {
    auto object = llvm::MemoryBuffer::getMemBuffer(
        llvm::StringRef(reinterpret_cast<const char*>(I.prebuilt->object), I.prebuilt->objectBytes),
        fmt::format("kiln.gemm.{}.o", I.prebuilt->cpu), /*RequiresNullTerminator=*/false);
    if (auto err = I.lljit->addObjectFile(I.lljit->getMainJITDylib(), std::move(object)))
      KILN_THROW("cannot add the prebuilt GEMM routines for {}: {}", I.prebuilt->cpu, message(std::move(err)));
    I.prebuiltLinked = true;
  }
  return &I.prebuiltNames;
}

std::string Jit::prebuiltGemmCpu() const { return impl_->prebuilt ? impl_->prebuilt->cpu : ""; }

void Jit::defineSymbol(const std::string& name, const void* address) {
  Impl& I = *impl_;
  KILN_CHECK(address, "defineSymbol('{}'): null address", name);
  if (auto it = I.hostSymbols.find(name); it != I.hostSymbols.end()) {
    KILN_CHECK(it->second == address, "symbol '{}' is already defined at another address", name);
    return;
  }
  llvm::orc::SymbolMap symbols;
  symbols[I.lljit->mangleAndIntern(name)] = {
      llvm::orc::ExecutorAddr::fromPtr(address),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (auto err = I.lljit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(symbols))))
    KILN_THROW("cannot define symbol '{}': {}", name, message(std::move(err)));
  I.hostSymbols.emplace(name, address);
}

const std::string& Jit::triple() const { return impl_->triple; }
const std::string& Jit::cpu() const { return impl_->cpu; }
const std::string& Jit::features() const { return impl_->features; }

bool Jit::emulatesBf16Dot() const { return impl_->emulateBf16Dot; }
bool Jit::emulatesAmx() const { return impl_->emulateAmx; }
bool Jit::targetsHost() const { return impl_->targetsHost; }

bool Jit::hasFeature(std::string_view feature) const {
  const llvm::MCSubtargetInfo* sti = impl_->tm->getMCSubtargetInfo();
  for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures())
    if (feature == kv.Key) return sti->getFeatureBits().test(kv.Value);
  return false;
}

int Jit::defaultPreferVectorWidth() const { return impl_->defaultWidth; }

JitStats Jit::stats() const { return impl_->stats; }

}  // namespace kiln::cpu
