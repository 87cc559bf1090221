#include "codegen/cpu/Program.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/Gemm.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "codegen/cpu/Render.h"
#include "kernels/Kernel.h"
#include "kernels/Placement.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/File.h"
#include "support/PeakLoops.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln::cpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// The kernel a function of the program belongs to: "k3_matmul.nest0" → "k3_matmul".
std::string kernelOf(const std::string& function) { return function.substr(0, function.find('.')); }

/// Splits a dumped module (.ll or .s) into the text of each kernel's functions.
std::map<std::string, std::string> splitByKernel(const std::string& text, bool assembly) {
  std::map<std::string, std::string> parts;
  std::regex start = assembly ? std::regex(R"re(^(k\d+_[\w.]*):)re") : std::regex(R"re(^define [^@]*@"?(k\d+_[\w.]*)"?\()re");
  std::istringstream in(text);
  std::string line, current;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, start)) current = kernelOf(m[1].str());
    if (!current.empty()) parts[current] += line + "\n";
    if (!assembly && line == "}") current.clear();
    if (assembly && line.rfind(".Lfunc_end", 0) == 0) current.clear();
  }
  return parts;
}

void writeKernelDumps(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(dir) / "kernels");
  for (const char* ext : {".ll", ".opt.ll", ".s"}) {
    fs::path whole = fs::path(dir) / (std::string("program") + ext);
    if (!fs::exists(whole)) continue;
    for (const auto& [kernel, text] : splitByKernel(readTextFile(whole.string()), std::string(ext) == ".s"))
      writeFileAtomically((fs::path(dir) / "kernels" / (kernel + ext)).string(), text);
  }
}


/// Places every value of the program (kernels/Placement.h); owned buffers start zeroed, constants
/// hold their values.
auto placerFor(const ir::Graph& graph, ProgramLayout& layout) {
  auto own = [&layout](const ir::Value* v, bool constant) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    if (constant)
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, kernels::constantElement(*v, i));
    layout.owned.push_back(std::move(t));
    layout.ownedIsConstant.push_back(constant);
    return layout.owned.size() - 1;
  };
  kernels::ValuePlacer<Location, decltype(own)> placer(graph, own);
  layout.arenaBytes = placer.arenaBytes();
  return placer;
}

/// The layout of `graph`'s program made of `kernels`.
ProgramLayout layOut(const ir::Graph& graph, const std::vector<kernels::Kernel>& kernels, const VectorIsa& isa) {
  ProgramLayout layout;
  auto placer = placerFor(graph, layout);
  for (const ir::Value* v : graph.inputs()) placer.place(v);
  for (const ir::Param& p : graph.params()) placer.place(p.value);
  const std::vector<bool> inPlace = kernels::updatesInPlace(graph, kernels);
  for (size_t u = 0; u < inPlace.size(); ++u)
    if (inPlace[u]) placer.placeAt(graph.updates()[u].value, placer.place(graph.updates()[u].param));
  for (const kernels::Kernel& k : kernels) {
    ProgramLayout::KernelCall call;
    call.name = k.name;
    for (const kernels::Buffer& b : k.buffers) call.args.push_back(placer.place(b.value));
    // Scratch grows linearly with the thread count (a slot per participant).
    const int64_t one = kernelScratchBytes(k, isa, 1), two = kernelScratchBytes(k, isa, 2);
    call.scratchPerThread = two - one;
    call.scratchBase = one - call.scratchPerThread;
    layout.kernels.push_back(std::move(call));
  }
  for (const ir::Output& o : graph.outputs()) layout.outputs.push_back(placer.place(o.value));
  for (const ir::Update& u : graph.updates())
    layout.updates.push_back({placer.place(u.param).index, placer.place(u.value)});
  return layout;
}

struct Rendered {
  std::vector<kernels::Kernel> kernels;
  std::unique_ptr<llvm::Module> module;
  VectorIsa isa;  // what the kernels were rendered for: their scratch is sized by it (layOut)
};

/// Lowers the graph's kernels and renders them into one module; `link`: the module declares the
/// Jit's prebuilt GEMM routines instead of defining them (PrebuiltGemm.h). `object`: for a library
/// (`kiln aot`), which never uses AMX tiles: its runtime does not ask Linux for the tile data.
/// `flushes`: the program runs with subnormals flushed (ProgramOptions::denormals), so its bf16
/// roundings may take vcvtneps2bf16 (setNativeBf16Rounding); a library learns its mode only when
/// it starts, and keeps the integer sequence.
Rendered render(const ir::Graph& graph, Jit& jit, ProgramStats& stats, bool link, bool object = false,
                bool flushes = false) {
  Rendered r;
  auto t0 = Clock::now();
  r.kernels = kernels::lowerGraph(graph);
  stats.lowerMs = msSince(t0);
  stats.kernels = static_cast<int>(r.kernels.size());
  t0 = Clock::now();
  r.module = std::make_unique<llvm::Module>(graph.name().empty() ? "program" : graph.name(), jit.context());
  VectorIsa& isa = r.isa = isaOf(jit);
  if (link) isa.linkedGemm = jit.prebuiltGemm();
  // A library has no tiles, so on this CPU bf16 products take vdpbf16ps pairs only where those
  // outrun the FMAs (isaOf assumed the tiles for the host; a named CPU stays assumed): on a Xeon
  // with AMX whose vdpbf16ps does half the FMAs' flops, simplenet's bf16 inference library at batch
  // 10000 took 83.7 ms on pairs.
  if (object) {
    if (isa.amx && jit.targetsHost()) isa.bf16DotPays = bf16DotOutrunsFma();
    isa.amx = isa.emulateAmx = false;
  }
  if (flushes && isa.avx512bf16 && isa.avx512) setNativeBf16Rounding(*r.module);
  for (const kernels::Kernel& k : r.kernels) {
    renderKernel(*r.module, k, isa);
    stats.bf16PairContractions += k.hasContraction && contractionUsesBf16Pairs(k, isa);
    stats.amxContractions += k.hasContraction && contractionUsesAmx(k, isa);
  }
  stats.renderMs = msSince(t0);
  for (const llvm::Function& f : *r.module)
    if (f.getName().starts_with("kiln.gemm.")) ++(f.isDeclaration() ? stats.gemmRoutinesLinked : stats.gemmRoutinesCompiled);
  return r;
}

CompileOptions compileOptions(const std::string& dumpDir) {
  CompileOptions co;
  co.pipeline = CompileOptions::Pipeline::Light;  // the renderer vectorizes and unrolls itself
  if (!dumpDir.empty()) {
    co.dumpDir = dumpDir;
    co.dumpStem = "program";
  }
  return co;
}

}  // namespace

int64_t ProgramLayout::scratchBytes(int threads) const {
  int64_t bytes = 0;
  for (const KernelCall& k : kernels) bytes = std::max(bytes, k.scratchBase + threads * k.scratchPerThread);
  return bytes;
}

ProgramObject compileObject(const ir::Graph& graph, const ObjectOptions& options) {
  Jit& jit = options.jit ? *options.jit : Jit::host();
  ProgramObject out;
  Rendered r = render(graph, jit, out.stats, /*link=*/false, /*object=*/true);  // the object stands alone
  out.layout = layOut(graph, r.kernels, r.isa);
  llvm::Module& m = *r.module;
  std::vector<std::pair<std::string, std::string>> blobs = options.blobs;
  out.constantOffsets.assign(out.layout.owned.size(), -1);
  if (!options.constantsSymbol.empty()) {
    std::string constants;
    for (size_t i = 0; i < out.layout.owned.size(); ++i) {
      if (!out.layout.ownedIsConstant[i]) continue;
      const rt::HostTensor& t = out.layout.owned[i];
      constants.resize((constants.size() + 63) / 64 * 64, '\0');
      out.constantOffsets[i] = static_cast<int64_t>(constants.size());
      constants.append(static_cast<const char*>(t.data()), t.bytes());
    }
    if (!constants.empty()) {
      blobs.emplace_back(options.constantsSymbol, std::move(constants));
      out.hasConstants = true;
    }
  }
  for (const auto& [name, bytes] : blobs) {
    auto* data = llvm::ConstantDataArray::getRaw(bytes, bytes.size(), llvm::Type::getInt8Ty(m.getContext()));
    auto* g = new llvm::GlobalVariable(m, data->getType(), /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                                       data, name);
    g->setAlignment(llvm::Align(64));
  }
  for (llvm::GlobalValue& gv : m.global_values())
    if (!gv.isDeclaration() && !gv.hasLocalLinkage()) gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
  const auto t0 = Clock::now();
  out.object = jit.emitObject(std::move(r.module), compileOptions(options.dumpDir));
  out.stats.compileMs = msSince(t0);
  if (!options.dumpDir.empty()) writeKernelDumps(options.dumpDir);
  for (const char* f : {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512bf16",
                        "amx-tile", "amx-bf16"})
    if (jit.hasFeature(f)) out.cpuFeatures.push_back(f);
  out.stats.arenaBytes = out.layout.arenaBytes;
  return out;
}

struct Program::Impl {
  ir::Graph graph;
  ProgramOptions options;
  ProgramStats stats;
  ProgramLayout layout;
  std::shared_ptr<const CompiledModule> module;
  std::vector<void (*)(void**, void*)> functions;
  std::vector<rt::HostTensor> params;  // graph parameter order
  rt::HostTensor arena, scratch;
  std::vector<void*> inputs;  // bound for the current run
  std::vector<std::optional<rt::HostTensor>> kept;  // per graph input: kept by keepInputs
  std::vector<std::vector<void*>> tables;
  std::vector<double> kernelMicros;  // ProgramOptions::profile: summed over profiledRuns
  int64_t profiledRuns = 0;
  /// Per graph output: whether its buffer is the program's own and holds nothing else (no
  /// constant, no update value, no other output), so it may trade places with a caller's tensor.
  std::vector<bool> outputTradable;

  void execute(const interp::TensorMap& inputs);

  void* address(const Location& at) {
    switch (at.kind) {
      case Location::Kind::Input: return inputs[at.index];
      case Location::Kind::Param: return params[at.index].data();
      case Location::Kind::Arena: return static_cast<std::byte*>(arena.data()) + at.offset;
      case Location::Kind::Own: return layout.owned[at.index].data();
    }
    return nullptr;
  }
};

Program::Program() : impl_(std::make_unique<Impl>()) {}
Program::~Program() = default;

std::unique_ptr<Program> Program::compile(const ir::Graph& graph, const ProgramOptions& options) {
  std::unique_ptr<Program> program(new Program());
  Impl& I = *program->impl_;
  I.graph = graph.clone();
  I.options = options;
  rt::ThreadPool& pool = options.pool ? *options.pool : rt::ThreadPool::global();
  Jit& jit = options.jit ? *options.jit : Jit::host();
  jit.defineSymbol("kiln_parallel_for", reinterpret_cast<const void*>(&kiln_parallel_for));

  // A dumping compile shows every routine's code: it compiles them into the module (the same IR).
  Rendered r = render(I.graph, jit, I.stats, /*link=*/options.dumpDir.empty(), /*object=*/false,
                      /*flushes=*/options.denormals == Denormals::Flush);
  I.layout = layOut(I.graph, r.kernels, r.isa);
  I.stats.scratchBytes = I.layout.scratchBytes(pool.threads());

  JitStats before = jit.stats();
  I.module = jit.compile(std::move(r.module), compileOptions(options.dumpDir));
  I.stats.cacheHit = jit.stats().cacheHits > before.cacheHits;
  I.stats.diskHit = !I.stats.cacheHit && I.module->fromDisk();
  I.stats.compileMs = I.stats.cacheHit ? 0 : I.module->compileMs();
  I.stats.compileParts = I.module->parts();
  if (!options.dumpDir.empty()) writeKernelDumps(options.dumpDir);
  for (const auto& k : I.layout.kernels) I.functions.push_back(I.module->fn<void(void**, void*)>(k.name));

  for (const ir::Param& p : I.graph.params()) {
    I.params.push_back(interp::initialize(p));
    I.stats.paramBytes += static_cast<int64_t>(I.params.back().bytes());
  }
  I.stats.arenaBytes = I.layout.arenaBytes;
  for (const ProgramLayout::UpdateCopy& u : I.layout.updates)
    I.stats.updatesInPlace += u.value == Location{Location::Kind::Param, u.param};
  I.arena = rt::HostTensor(DType::boolean, {std::max<int64_t>(I.stats.arenaBytes, 1)});
  I.scratch = rt::HostTensor(DType::boolean, {std::max<int64_t>(I.stats.scratchBytes, 1)});
  I.inputs.assign(I.graph.inputs().size(), nullptr);
  I.kept.resize(I.graph.inputs().size());
  I.tables.resize(I.layout.kernels.size());
  I.kernelMicros.assign(I.layout.kernels.size(), 0.0);
  for (const Location& at : I.layout.outputs) {
    bool alone = at.kind == Location::Kind::Own && !I.layout.ownedIsConstant[at.index] &&
                 std::count(I.layout.outputs.begin(), I.layout.outputs.end(), at) == 1;
    for (const ProgramLayout::UpdateCopy& u : I.layout.updates) alone = alone && u.value != at;
    I.outputTradable.push_back(alone);
  }
  return program;
}

void Program::Impl::execute(const interp::TensorMap& given) {
  const auto& graphInputs = graph.inputs();
  for (size_t i = 0; i < graphInputs.size(); ++i) {
    const ir::Value* v = graphInputs[i];
    auto it = given.find(v->name);
    if (it == given.end()) {
      KILN_CHECK(kept[i], "missing input '{}' ({}): neither given nor kept", v->name, v->type.str());
      inputs[i] = kept[i]->data();
      continue;
    }
    const rt::HostTensor& t = it->second;
    KILN_CHECK(t.dtype() == v->type.dtype && t.shape() == v->type.shape, "input '{}' is {}, expected {}", v->name,
               t.typeStr(), v->type.str());
    if (kept[i]) {
      *kept[i] = t;
      inputs[i] = kept[i]->data();
      continue;
    }
    inputs[i] = const_cast<void*>(t.data());  // kernels never write inputs
  }
  rt::ThreadPool* pool = options.pool;
  const ScopedDenormals mode(options.denormals);  // the pool's workers take it on per chunk
  for (size_t k = 0; k < layout.kernels.size(); ++k) {
    std::vector<void*>& table = tables[k];
    table.clear();
    for (const Location& at : layout.kernels[k].args) table.push_back(address(at));
    table.push_back(scratch.data());
    if (!options.profile) {
      functions[k](table.data(), pool);
      continue;
    }
    const auto t0 = Clock::now();
    functions[k](table.data(), pool);
    kernelMicros[k] += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  profiledRuns += options.profile;
}

void Program::keepInputs(interp::TensorMap inputs) {
  Impl& I = *impl_;
  const auto& graphInputs = I.graph.inputs();
  for (size_t i = 0; i < graphInputs.size(); ++i) {
    const ir::Value* v = graphInputs[i];
    auto it = inputs.find(v->name);
    if (it == inputs.end()) continue;
    KILN_CHECK(it->second.dtype() == v->type.dtype && it->second.shape() == v->type.shape,
               "input '{}' is {}, expected {}", v->name, it->second.typeStr(), v->type.str());
    I.kept[i] = std::move(it->second);
  }
}

interp::TensorMap Program::run(const interp::TensorMap& inputs) {
  interp::TensorMap outputs;
  run(inputs, outputs);
  return outputs;
}

void Program::run(const interp::TensorMap& inputs, interp::TensorMap& outputs) {
  Impl& I = *impl_;
  I.execute(inputs);
  for (size_t i = 0; i < I.graph.outputs().size(); ++i) {
    const ir::Output& o = I.graph.outputs()[i];
    auto it = outputs.find(o.name);
    const bool fits = it != outputs.end() && it->second.dtype() == o.value->type.dtype &&
                      it->second.shape() == o.value->type.shape;
    if (fits && I.outputTradable[i]) {
      // The caller's tensor becomes the buffer the next run writes this output into.
      std::swap(it->second, I.layout.owned[I.layout.outputs[i].index]);
      continue;
    }
    if (!fits) it = outputs.insert_or_assign(o.name, rt::HostTensor(o.value->type.dtype, o.value->type.shape)).first;
    std::memcpy(it->second.data(), I.address(I.layout.outputs[i]), it->second.bytes());
  }
  // New parameter values: an owned update buffer trades places with the parameter (its old
  // bytes become next step's update buffer); anything else (an input, another parameter, a value
  // that updates two parameters) is copied, before any trade changes what it reads.
  std::vector<std::pair<size_t, size_t>> trades;  // parameter, owned tensor
  std::vector<std::pair<size_t, rt::HostTensor>> copies;
  std::unordered_set<size_t> traded;
  for (const ProgramLayout::UpdateCopy& u : I.layout.updates) {
    if (u.value == Location{Location::Kind::Param, u.param}) continue;
    if (u.value.kind == Location::Kind::Own && traded.insert(u.value.index).second) {
      trades.emplace_back(u.param, u.value.index);
      continue;
    }
    rt::HostTensor t(I.params[u.param].dtype(), I.params[u.param].shape());
    std::memcpy(t.data(), I.address(u.value), t.bytes());
    copies.emplace_back(u.param, std::move(t));
  }
  for (auto [param, own] : trades) std::swap(I.params[param], I.layout.owned[own]);
  for (auto& [param, t] : copies) I.params[param] = std::move(t);
}

void Program::setParams(const interp::TensorMap& params) {
  Impl& I = *impl_;
  for (const auto& [name, t] : params) {
    size_t i = 0;
    for (; i < I.graph.params().size(); ++i)
      if (I.graph.params()[i].value->name == name) break;
    KILN_CHECK(i < I.graph.params().size(), "the program has no parameter '{}'", name);
    const ir::TensorType& type = I.graph.params()[i].value->type;
    KILN_CHECK(t.dtype() == type.dtype && t.shape() == type.shape, "parameter '{}' is {}, expected {}", name,
               t.typeStr(), type.str());
    I.params[i] = t;
  }
}

interp::TensorMap Program::params() const {
  interp::TensorMap out;
  for (size_t i = 0; i < impl_->graph.params().size(); ++i)
    out.insert_or_assign(impl_->graph.params()[i].value->name, impl_->params[i]);
  return out;
}

const ir::Graph& Program::graph() const { return impl_->graph; }
const ProgramStats& Program::stats() const { return impl_->stats; }
const ProgramLayout& Program::layout() const { return impl_->layout; }

std::vector<double> Program::kernelMicros() const { return impl_->kernelMicros; }
int64_t Program::profiledRuns() const { return impl_->profiledRuns; }
void Program::resetProfile() {
  impl_->kernelMicros.assign(impl_->kernelMicros.size(), 0.0);
  impl_->profiledRuns = 0;
}

std::vector<std::string> Program::kernelNames() const {
  std::vector<std::string> names;
  for (const ProgramLayout::KernelCall& k : impl_->layout.kernels) names.push_back(k.name);
  return names;
}

}  // namespace kiln::cpu
