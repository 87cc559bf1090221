// The CPU JIT under the kernel renderer: modules built with IRBuilder are optimized, compiled,
// cached, dumped and called; bad modules and bad targets give kiln::Error.
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/ModuleSplit.h"
#include "support/File.h"
#include "tests/runtime/TestFiles.h"

#include <llvm/AsmParser/Parser.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>
#include <vector>

#include <unistd.h>

namespace {

using kiln::cpu::CompileOptions;
using kiln::cpu::Jit;
using kiln::cpu::JitOptions;
using kiln::rt::test::errorOf;
using kiln::rt::test::ScratchDir;

std::unique_ptr<llvm::Module> newModule(Jit& jit, const std::string& name) {
  return std::make_unique<llvm::Module>(name, jit.context());
}

/// float NAME(float a, float b) { return a OP b; }
std::unique_ptr<llvm::Module> binaryModule(Jit& jit, const std::string& name, bool subtract = false) {
  auto m = newModule(jit, name);
  llvm::IRBuilder<> b(jit.context());
  auto* f32 = b.getFloatTy();
  auto* f = llvm::Function::Create(llvm::FunctionType::get(f32, {f32, f32}, false),
                                   llvm::Function::ExternalLinkage, "binary", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", f));
  b.CreateRet(subtract ? b.CreateFSub(f->getArg(0), f->getArg(1))
                       : b.CreateFAdd(f->getArg(0), f->getArg(1)));
  return m;
}

/// A counted loop `for (i = 0; i < n; ++i)` (n >= 1): beginLoop leaves the builder in the body,
/// endLoop closes it and leaves the builder in the exit block.
struct Loop {
  llvm::PHINode* index;
  llvm::BasicBlock* body;
};

Loop beginLoop(llvm::IRBuilder<>& b) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  auto* entry = b.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(b.getContext(), "body", f);
  b.CreateBr(body);
  b.SetInsertPoint(body);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  return {i, body};
}

void endLoop(llvm::IRBuilder<>& b, Loop& loop, llvm::Value* n) {
  llvm::Value* next = b.CreateAdd(loop.index, b.getInt64(1), "next", /*HasNUW=*/true, true);
  loop.index->addIncoming(next, b.GetInsertBlock());
  auto* exit = llvm::BasicBlock::Create(b.getContext(), "exit", loop.body->getParent());
  b.CreateCondBr(b.CreateICmpSLT(next, n), loop.body, exit);
  b.SetInsertPoint(exit);
}

/// float sum(const float* x, int64_t n) — a plain (ordered) reduction; callers pass n >= 1.
std::unique_ptr<llvm::Module> sumModule(Jit& jit) {
  auto m = newModule(jit, "sum");
  llvm::IRBuilder<> b(jit.context());
  auto* f = llvm::Function::Create(
      llvm::FunctionType::get(b.getFloatTy(), {b.getPtrTy(), b.getInt64Ty()}, false),
      llvm::Function::ExternalLinkage, "sum", *m);
  auto* entry = llvm::BasicBlock::Create(jit.context(), "entry", f);
  b.SetInsertPoint(entry);
  Loop loop = beginLoop(b);
  llvm::PHINode* acc = b.CreatePHI(b.getFloatTy(), 2, "acc");
  acc->addIncoming(llvm::ConstantFP::get(b.getFloatTy(), 0.0), entry);
  llvm::Value* x = b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), f->getArg(0), loop.index));
  llvm::Value* next = b.CreateFAdd(acc, x);
  acc->addIncoming(next, loop.body);
  endLoop(b, loop, f->getArg(1));
  b.CreateRet(next);
  return m;
}

/// void vadd(const float* noalias a, const float* noalias b, float* noalias c, int64_t n):
/// c[i] = a[i] + b[i] — what the loop vectorizer turns into packed adds. Callers pass n >= 1.
std::unique_ptr<llvm::Module> vaddModule(Jit& jit) {
  auto m = newModule(jit, "vadd");
  llvm::IRBuilder<> b(jit.context());
  auto* ptr = b.getPtrTy();
  auto* f = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, b.getInt64Ty()}, false),
      llvm::Function::ExternalLinkage, "vadd", *m);
  for (unsigned i = 0; i < 3; ++i) f->addParamAttr(i, llvm::Attribute::NoAlias);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", f));
  Loop loop = beginLoop(b);
  auto* f32 = b.getFloatTy();
  llvm::Value* x = b.CreateLoad(f32, b.CreateGEP(f32, f->getArg(0), loop.index));
  llvm::Value* y = b.CreateLoad(f32, b.CreateGEP(f32, f->getArg(1), loop.index));
  b.CreateStore(b.CreateFAdd(x, y), b.CreateGEP(f32, f->getArg(2), loop.index));
  endLoop(b, loop, f->getArg(3));
  b.CreateRetVoid();
  return m;
}

/// int64_t call_host(int64_t x) { return NAME(x) + 1; } with NAME declared, not defined.
std::unique_ptr<llvm::Module> callerModule(Jit& jit, const std::string& callee) {
  auto m = newModule(jit, "caller_of_" + callee);
  llvm::IRBuilder<> b(jit.context());
  auto* i64 = b.getInt64Ty();
  auto* type = llvm::FunctionType::get(i64, {i64}, false);
  llvm::FunctionCallee target = m->getOrInsertFunction(callee, type);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "call_host", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", f));
  b.CreateRet(b.CreateAdd(b.CreateCall(target, {f->getArg(0)}), b.getInt64(1)));
  return m;
}

std::string readText(const std::filesystem::path& p) { return kiln::readTextFile(p.string()); }

/// Whether the assembly has an instruction `mnemonic` with an operand in a `reg` register
/// ("ymm"): "vaddps (%rsi,%r8,4), %ymm0, %ymm0" counts.
bool hasInstruction(const std::string& assembly, const std::string& mnemonic, const std::string& reg) {
  std::istringstream lines(assembly);
  for (std::string line; std::getline(lines, line);) {
    auto start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line.compare(start, mnemonic.size() + 1, mnemonic + "\t") == 0 &&
        line.find("%" + reg) != std::string::npos)
      return true;
  }
  return false;
}

/// Options that dump to DIR/STEM.{ll,opt.ll,s}.
CompileOptions dumpTo(const ScratchDir& dir, const std::string& stem, int preferVectorWidth = 0) {
  CompileOptions options;
  options.dumpDir = dir.path().string();
  options.dumpStem = stem;
  options.preferVectorWidth = preferVectorWidth;
  return options;
}

JitOptions forCpu(const std::string& cpu, const std::string& features = "") {
  JitOptions options;
  options.cpu = cpu;
  options.features = features;
  return options;
}

extern "C" std::int64_t kilnJitTestTriple(std::int64_t x) { return 3 * x; }
extern "C" std::int64_t kilnJitTestSquare(std::int64_t x) { return x * x; }

TEST(Jit, CompilesAndCallsAScalarFunction) {
  Jit jit;
  auto compiled = jit.compile(binaryModule(jit, "add"));
  EXPECT_EQ(compiled->fn<float(float, float)>("binary")(2.0f, 3.5f), 5.5f);
  EXPECT_EQ(compiled->name(), "add");
  EXPECT_EQ(compiled->symbols(), std::vector<std::string>{"binary"});
  EXPECT_GT(compiled->compileMs(), 0.0);
  EXPECT_EQ(jit.stats().compiles, 1);
  EXPECT_EQ(jit.stats().compileMs, compiled->compileMs());
}

// KILN_PERF_MAP=1: every function a module defines, internal ones included, is named in
// /tmp/perf-PID.map at the address it was linked to, for `perf report`.
TEST(Jit, WritesAPerfMapOnRequest) {
  const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  std::filesystem::remove(path);
  ::setenv("KILN_PERF_MAP", "1", 1);
  Jit jit;
  ::unsetenv("KILN_PERF_MAP");
  auto m = newModule(jit, "perf");
  llvm::IRBuilder<> b(jit.context());
  auto* f32 = b.getFloatTy();
  auto* type = llvm::FunctionType::get(f32, {f32, f32}, false);
  auto* helper = llvm::Function::Create(type, llvm::Function::InternalLinkage, "kiln.test.perf_helper", *m);
  helper->addFnAttr(llvm::Attribute::NoInline);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", helper));
  b.CreateRet(b.CreateFMul(helper->getArg(0), helper->getArg(1)));
  auto* outer = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "outer", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", outer));
  b.CreateRet(b.CreateFAdd(b.CreateCall(helper, {outer->getArg(0), outer->getArg(1)}),
                           llvm::ConstantFP::get(f32, 1.0)));
  auto compiled = jit.compile(std::move(m));
  auto fn = compiled->fn<float(float, float)>("outer");
  EXPECT_EQ(fn(2.0f, 3.0f), 7.0f);

  std::istringstream lines(kiln::readTextFile(path));
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> named;  // name → address, size
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string address, size, name;
    fields >> address >> size >> name;
    named[name] = {std::stoull(address, nullptr, 16), std::stoull(size, nullptr, 16)};
  }
  std::filesystem::remove(path);
  ASSERT_TRUE(named.count("outer")) << "no 'outer' in " << path;
  ASSERT_TRUE(named.count("kiln.test.perf_helper")) << "no internal function in " << path;
  EXPECT_EQ(named["outer"].first, reinterpret_cast<std::uintptr_t>(fn));
  EXPECT_GT(named["outer"].second, 0u);
  EXPECT_GT(named["kiln.test.perf_helper"].second, 0u);
}

TEST(Jit, DescribesItsTarget) {
  Jit jit;
  EXPECT_NE(jit.triple().find("x86_64"), std::string::npos) << jit.triple();
  EXPECT_FALSE(jit.cpu().empty());
  EXPECT_TRUE(jit.hasFeature("sse2"));
  EXPECT_FALSE(jit.hasFeature("no-such-feature"));
  EXPECT_EQ(jit.defaultPreferVectorWidth(), jit.hasFeature("avx512f") ? 512 : 256);
}

TEST(Jit, SumsAFloatArray) {
  Jit jit;
  auto sum = jit.compile(sumModule(jit))->fn<float(const float*, std::int64_t)>("sum");
  for (std::int64_t n : {1, 7, 33, 1000}) {
    std::vector<float> x(n);
    std::iota(x.begin(), x.end(), 1.0f);
    EXPECT_EQ(sum(x.data(), n), static_cast<float>(n * (n + 1) / 2)) << "n = " << n;
  }
}

TEST(Jit, VectorizesALoopAndDumpsIrAndAssembly) {
  Jit jit;
  ScratchDir dir;
  auto compiled = jit.compile(vaddModule(jit), dumpTo(dir, "vadd"));
  auto vadd = compiled->fn<void(const float*, const float*, float*, std::int64_t)>("vadd");
  for (std::int64_t n : {1, 7, 33, 1000}) {
    std::vector<float> a(n), b(n), c(n, -1.0f);
    std::iota(a.begin(), a.end(), 0.5f);
    std::iota(b.begin(), b.end(), -3.0f);
    vadd(a.data(), b.data(), c.data(), n);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "n = " << n << ", i = " << i;
  }

  const std::string before = readText(dir.path() / "vadd.ll");
  const std::string after = readText(dir.path() / "vadd.opt.ll");
  const std::string assembly = readText(dir.path() / "vadd.s");
  EXPECT_NE(before.find("define void @vadd"), std::string::npos);
  EXPECT_EQ(before.find("<8 x float>"), std::string::npos) << "the input IR is scalar";
  EXPECT_NE(before.find("\"prefer-vector-width\"=\"" + std::to_string(jit.defaultPreferVectorWidth())),
            std::string::npos);
  EXPECT_NE(after.find("x float>"), std::string::npos) << after;
  // The widest packed add the host has, at the preferred width.
  const bool avx512 = jit.hasFeature("avx512f"), avx = jit.hasFeature("avx");
  EXPECT_TRUE(hasInstruction(assembly, avx ? "vaddps" : "addps", avx512 ? "zmm" : avx ? "ymm" : "xmm"))
      << assembly;
}

TEST(Jit, PreferredVectorWidthSteersTheVectorizer) {
  // Code for an AVX-512 CPU is only generated here, never run: this host may lack AVX-512.
  Jit jit(forCpu("skylake-avx512"));
  EXPECT_TRUE(jit.hasFeature("avx512f"));
  EXPECT_EQ(jit.defaultPreferVectorWidth(), 512);
  ScratchDir dir;
  jit.compile(vaddModule(jit), dumpTo(dir, "wide"));
  jit.compile(vaddModule(jit), dumpTo(dir, "narrow", 256));
  const std::string wide = readText(dir.path() / "wide.s");
  const std::string narrow = readText(dir.path() / "narrow.s");
  EXPECT_TRUE(hasInstruction(wide, "vaddps", "zmm")) << wide;
  EXPECT_EQ(narrow.find("zmm"), std::string::npos) << narrow;
  EXPECT_TRUE(hasInstruction(narrow, "vaddps", "ymm")) << narrow;
  EXPECT_EQ(jit.stats().compiles, 2) << "a different width is a different cache entry";

  Jit baseline(forCpu("x86-64"));
  EXPECT_FALSE(baseline.hasFeature("avx"));
  EXPECT_EQ(baseline.defaultPreferVectorWidth(), 256);
  auto sse = baseline.compile(vaddModule(baseline), dumpTo(dir, "sse"));
  const std::string assembly = readText(dir.path() / "sse.s");
  EXPECT_TRUE(hasInstruction(assembly, "addps", "xmm")) << assembly;
  EXPECT_EQ(assembly.find("ymm"), std::string::npos) << assembly;
  std::vector<float> a{1, 2, 3, 4, 5}, b{10, 20, 30, 40, 50}, c(5);
  sse->fn<void(const float*, const float*, float*, std::int64_t)>("vadd")(a.data(), b.data(), c.data(), 5);
  EXPECT_EQ(c, (std::vector<float>{11, 22, 33, 44, 55}));
}

TEST(Jit, CacheHitReturnsTheSameCodeWithoutCompiling) {
  Jit jit;
  auto first = jit.compile(vaddModule(jit));
  ScratchDir dir;
  auto second = jit.compile(vaddModule(jit), dumpTo(dir, "again"));
  EXPECT_EQ(first, second);
  EXPECT_EQ(first->address("vadd"), second->address("vadd"));
  EXPECT_EQ(jit.stats().compiles, 1);
  EXPECT_EQ(jit.stats().cacheHits, 1);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "again.s")) << "a hit still writes the dumps";

  auto other = jit.compile(binaryModule(jit, "add"));
  EXPECT_NE(other->hash(), first->hash());
  EXPECT_EQ(jit.stats().compiles, 2);
}

// JitOptions::cacheDir keeps compiled modules across Jits (and processes): a second Jit loads the
// object instead of compiling; a damaged entry is compiled again and replaced; another target is
// another entry; a folder that cannot be written leaves the cache unused, never an error.
TEST(Jit, DiskCacheKeepsCompiledModulesAcrossJits) {
  ScratchDir dir;
  const std::filesystem::path cache = dir.path() / "cache";
  JitOptions options;
  options.cacheDir = cache.string();
  auto entries = [&] {
    size_t n = 0;
    if (std::filesystem::exists(cache))
      for (const auto& e : std::filesystem::directory_iterator(cache)) n += e.path().extension() == ".kjit";
    return n;
  };
  auto run = [](const kiln::cpu::CompiledModule& m) {
    std::vector<float> a{1, 2, 3, 4, 5}, b{10, 20, 30, 40, 50}, c(5);
    m.fn<void(const float*, const float*, float*, std::int64_t)>("vadd")(a.data(), b.data(), c.data(), 5);
    return c;
  };
  const std::vector<float> want{11, 22, 33, 44, 55};
  {
    Jit first(options);
    auto m = first.compile(vaddModule(first));
    EXPECT_FALSE(m->fromDisk());
    EXPECT_EQ(first.stats().compiles, 1);
    EXPECT_EQ(run(*m), want);
  }
  ASSERT_EQ(entries(), 1u);
  const std::filesystem::path entry = std::filesystem::directory_iterator(cache)->path();
  {
    Jit second(options);
    auto m = second.compile(vaddModule(second));
    EXPECT_TRUE(m->fromDisk());
    EXPECT_EQ(second.stats().compiles, 0);
    EXPECT_EQ(second.stats().diskHits, 1);
    EXPECT_EQ(run(*m), want);
    EXPECT_FALSE(second.compile(binaryModule(second, "add"))->fromDisk()) << "other IR, another entry";
  }
  EXPECT_EQ(entries(), 2u);
  const std::string good = kiln::readTextFile(entry.string());
  // Flipped bytes inside an object keep its ELF structure whole: only the entry's content hash
  // tells (linked, they would run as damaged machine code).
  std::string flipped = good;
  for (size_t i = flipped.size() / 2; i < flipped.size() / 2 + 16; ++i) flipped[i] = static_cast<char>(~flipped[i]);
  for (const std::string& damaged : {std::string("garbage"), good.substr(0, good.size() / 2), std::string(), flipped}) {
    kiln::writeFileAtomically(entry.string(), damaged);
    Jit third(options);
    auto m = third.compile(vaddModule(third));
    EXPECT_FALSE(m->fromDisk()) << damaged.size() << " bytes";
    EXPECT_EQ(run(*m), want);
    EXPECT_TRUE(kiln::readTextFile(entry.string()) == good) << "the entry is replaced";
  }
  {
    JitOptions sse2 = options;
    sse2.cpu = "x86-64";
    Jit other(sse2);
    EXPECT_FALSE(other.compile(vaddModule(other))->fromDisk()) << "another target";
    EXPECT_EQ(entries(), 3u);
  }
  {
    JitOptions unwritable = options;
    unwritable.cacheDir = (entry / "not-a-folder").string();  // under a file
    Jit jit(unwritable);
    auto m = jit.compile(vaddModule(jit));
    EXPECT_EQ(run(*m), want);
  }
}

TEST(Jit, ModulesMayReuseFunctionNames) {
  Jit jit;
  auto add = jit.compile(binaryModule(jit, "add"))->fn<float(float, float)>("binary");
  auto sub = jit.compile(binaryModule(jit, "sub", /*subtract=*/true))->fn<float(float, float)>("binary");
  EXPECT_EQ(add(5, 2), 7);
  EXPECT_EQ(sub(5, 2), 3);
}

TEST(Jit, DefinedHostSymbolsAreCallable) {
  Jit jit;
  jit.defineSymbol("kiln_test_triple", reinterpret_cast<const void*>(&kilnJitTestTriple));
  jit.defineSymbol("kiln_test_triple", reinterpret_cast<const void*>(&kilnJitTestTriple));
  auto call = jit.compile(callerModule(jit, "kiln_test_triple"))->fn<std::int64_t(std::int64_t)>("call_host");
  EXPECT_EQ(call(14), 43);
  EXPECT_NE(errorOf([&] {
              jit.defineSymbol("kiln_test_triple", reinterpret_cast<const void*>(&kilnJitTestSquare));
            }).find("already defined"),
            std::string::npos);
}

/// A module that splits: an internal noinline `routine` (as the GEMM routines) and `users`
/// functions, each storing the routine's address in *slot (as a kernel hands it to the thread
/// pool) and calling it, with a chain of adds that makes each user a part of its own.
std::unique_ptr<llvm::Module> splitModule(Jit& jit, int users) {
  std::string ir = "define internal void @routine(ptr %x) noinline {\n"
                   "  %v = load float, ptr %x\n  %w = fadd float %v, 1.0\n  store float %w, ptr %x\n  ret void\n}\n";
  for (int u = 0; u < users; ++u) {
    ir += "define void @user" + std::to_string(u) + "(ptr %slot, ptr %x, ptr %y) {\n"
          "  store ptr @routine, ptr %slot\n  call void @routine(ptr %x)\n  %a0 = load float, ptr %y\n";
    for (int i = 1; i <= 300; ++i)
      ir += "  %a" + std::to_string(i) + " = fadd float %a" + std::to_string(i - 1) + ", 1.0\n";
    ir += "  store float %a300, ptr %y\n  ret void\n}\n";
  }
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(ir, error, jit.context());
  if (!m) {
    std::string text;
    llvm::raw_string_ostream os(text);
    error.print("split", os);
    ADD_FAILURE() << text;
  }
  return m;
}

// A split module's parts are separate objects that JITLink may place gigabytes apart (on a GPU
// machine the CUDA driver's address reservations did): a part reaches a routine of another part
// through a GOT entry or a call stub, never a 32-bit PC-relative fixup of the symbol itself.
TEST(JitSplit, PartsReachEachOtherThroughTheGotOrAStub) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the relocation types checked are x86-64's";
#endif
  Jit jit;
  std::unique_ptr<llvm::Module> whole = splitModule(jit, 3);
  ASSERT_TRUE(whole);
  const kiln::cpu::SplitPlan plan = kiln::cpu::planSplit(*whole, 4, 100);
  ASSERT_GE(plan.instructions.size(), 2u);
  ASSERT_EQ(plan.shared, std::vector<std::string>{"routine"});
  std::string bitcode;
  {
    llvm::raw_string_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*whole, os);
  }
  int foreign = 0;
  for (int part = 0; part < static_cast<int>(plan.instructions.size()); ++part) {
    std::string object = jit.emitObject(kiln::cpu::loadPart(llvm::MemoryBufferRef(bitcode, "split"), plan, part, jit.context()));
    auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, "part"));
    ASSERT_TRUE(static_cast<bool>(file)) << llvm::toString(file.takeError());
    for (const llvm::object::SectionRef& section : (*file)->sections())
      for (const llvm::object::RelocationRef& r : section.relocations()) {
        llvm::object::symbol_iterator sym = r.getSymbol();
        if (sym == (*file)->symbol_end()) continue;
        llvm::Expected<uint32_t> flags = sym->getFlags();
        ASSERT_TRUE(static_cast<bool>(flags)) << llvm::toString(flags.takeError());
        if (!(*flags & llvm::object::SymbolRef::SF_Undefined)) continue;
        llvm::Expected<llvm::StringRef> name = sym->getName();
        ASSERT_TRUE(static_cast<bool>(name)) << llvm::toString(name.takeError());
        if (*name != "routine") continue;
        ++foreign;
        const uint64_t type = r.getType();
        llvm::SmallString<32> typeName;
        r.getTypeName(typeName);
        EXPECT_TRUE(type != llvm::ELF::R_X86_64_PC32 && type != llvm::ELF::R_X86_64_32 &&
                    type != llvm::ELF::R_X86_64_32S && type != llvm::ELF::R_X86_64_PC64)
            << "part " << part << " reaches routine, defined in another part, through " << typeName.str().str();
      }
  }
  EXPECT_GT(foreign, 0) << "no part referred to a routine of another part: the split did not test anything";
}

// The same module through Jit::compile on two threads: every user stores the one routine's address
// and the calls through it and from it reach that routine.
TEST(JitSplit, PartsLinkIntoOneProgram) {
  JitOptions options;
  options.compileThreads = 2;
  Jit jit(options);
  std::unique_ptr<llvm::Module> m = splitModule(jit, 4);
  ASSERT_TRUE(m);
  auto compiled = jit.compile(std::move(m));
  EXPECT_GT(compiled->parts(), 1);
  void* first = nullptr;
  for (int u = 0; u < 4; ++u) {
    void* slot = nullptr;
    float x = 10, y = 0.5f;
    compiled->fn<void(void**, float*, float*)>("user" + std::to_string(u))(&slot, &x, &y);
    EXPECT_EQ(x, 11) << "user" << u;
    EXPECT_EQ(y, 300.5f) << "user" << u;
    ASSERT_NE(slot, nullptr);
    if (!first) first = slot;
    EXPECT_EQ(slot, first) << "user" << u << " stored another address of the routine";
    reinterpret_cast<void (*)(float*)>(slot)(&x);
    EXPECT_EQ(x, 12) << "through user" << u << "'s pointer";
  }
}

TEST(JitErrors, InvalidModuleNamesTheVerifier) {
  Jit jit;
  auto m = newModule(jit, "broken");
  llvm::IRBuilder<> b(jit.context());
  auto* f = llvm::Function::Create(llvm::FunctionType::get(b.getFloatTy(), {}, false),
                                   llvm::Function::ExternalLinkage, "no_terminator", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(jit.context(), "entry", f));
  b.CreateFAdd(llvm::ConstantFP::get(b.getFloatTy(), 1.0), llvm::ConstantFP::get(b.getFloatTy(), 2.0));
  std::string message = errorOf([&] { jit.compile(std::move(m)); });
  EXPECT_NE(message.find("module 'broken' fails the LLVM verifier"), std::string::npos) << message;
  EXPECT_NE(message.find("no_terminator"), std::string::npos) << message;
  // The Jit is still usable.
  EXPECT_EQ(jit.compile(binaryModule(jit, "add"))->fn<float(float, float)>("binary")(1, 2), 3);
}

TEST(JitErrors, UndefinedSymbolIsAnErrorNotAnAbort) {
  Jit jit;
  std::string message = errorOf([&] { jit.compile(callerModule(jit, "kiln_no_such_function")); });
  EXPECT_NE(message.find("cannot compile module 'caller_of_kiln_no_such_function'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("kiln_no_such_function"), std::string::npos) << message;
  EXPECT_EQ(jit.stats().compiles, 0);
  // Defining it afterwards makes the same module compile.
  jit.defineSymbol("kiln_no_such_function", reinterpret_cast<const void*>(&kilnJitTestSquare));
  EXPECT_EQ(jit.compile(callerModule(jit, "kiln_no_such_function"))
                ->fn<std::int64_t(std::int64_t)>("call_host")(5),
            26);
}

TEST(JitErrors, LookingUpAMissingFunctionListsTheDefinedOnes) {
  Jit jit;
  auto compiled = jit.compile(binaryModule(jit, "add"));
  std::string message = errorOf([&] { compiled->address("mul"); });
  EXPECT_EQ(message, "module 'add' defines no symbol 'mul' (it defines: binary)");
}

TEST(JitErrors, UnsupportedCpuOrFeature) {
  EXPECT_NE(errorOf([] { Jit jit(forCpu("pentium-9000")); }).find("unsupported CPU 'pentium-9000'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { Jit jit(forCpu("", "+avx2,+warp-drive")); })
                .find("unknown CPU feature 'warp-drive'"),
            std::string::npos);
}

TEST(JitErrors, ModuleFromAnotherContextOrBadWidth) {
  Jit jit;
  llvm::LLVMContext other;
  std::string message = errorOf([&] { jit.compile(std::make_unique<llvm::Module>("stray", other)); });
  EXPECT_NE(message.find("module 'stray' was not created in the Jit's LLVMContext"), std::string::npos)
      << message;
  message = errorOf([&] { CompileOptions options;
    options.preferVectorWidth = 384;
    jit.compile(binaryModule(jit, "add"), options); });
  EXPECT_NE(message.find("preferred vector width 384"), std::string::npos) << message;
}

}  // namespace
