#include "codegen/cpu/Program.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "codegen/cpu/Render.h"
#include "kernels/Kernel.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/File.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln::cpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// Where a value's bytes live.
struct Storage {
  enum class Kind : uint8_t { Input, Param, Arena, Own } kind;
  size_t index = 0;  // Input: graph input; Param: graph parameter; Own: owned tensor
  int64_t offset = 0;  // Arena
};

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

}  // namespace

struct Program::Impl {
  ir::Graph graph;
  ProgramOptions options;
  ProgramStats stats;
  std::vector<kernels::Kernel> kernels;
  std::shared_ptr<const CompiledModule> module;
  std::vector<void (*)(void**, void*)> functions;
  std::unordered_map<const ir::Value*, Storage> storage;
  std::vector<rt::HostTensor> params;  // graph parameter order
  std::vector<rt::HostTensor> owned;
  rt::HostTensor arena, scratch;
  std::vector<void*> inputs;  // bound for the current run
  std::vector<std::vector<void*>> tables;

  void* address(const ir::Value* v) {
    const Storage& s = storage.at(v);
    switch (s.kind) {
      case Storage::Kind::Input: return inputs[s.index];
      case Storage::Kind::Param: return params[s.index].data();
      case Storage::Kind::Arena: return static_cast<std::byte*>(arena.data()) + s.offset;
      case Storage::Kind::Own: return owned[s.index].data();
    }
    return nullptr;
  }

  void place(const ir::Value* v, const std::unordered_map<const ir::Value*, int64_t>& slots) {
    if (storage.count(v)) return;
    if (v->kind == ir::ValueKind::Input) {
      const auto& ins = graph.inputs();
      size_t i = static_cast<size_t>(std::find(ins.begin(), ins.end(), v) - ins.begin());
      storage[v] = {Storage::Kind::Input, i};
      return;
    }
    if (v->kind == ir::ValueKind::Param) {
      for (size_t i = 0; i < graph.params().size(); ++i)
        if (graph.params()[i].value == v) storage[v] = {Storage::Kind::Param, i};
      return;
    }
    // Constant data is filled once and kept apart (the plan may give it an arena slot too).
    const bool constant = v->producer && v->producer->op == ir::OpKind::Constant;
    if (auto it = slots.find(v); it != slots.end() && !constant) {
      storage[v] = {Storage::Kind::Arena, 0, it->second};
      return;
    }
    rt::HostTensor t(v->type.dtype, v->type.shape);
    if (constant) {
      const std::vector<double>& values = v->producer->attrFloats("value");
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values.size() == 1 ? values[0] : values[static_cast<size_t>(i)]);
    }
    storage[v] = {Storage::Kind::Own, owned.size()};
    owned.push_back(std::move(t));
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
  VectorIsa isa = isaOf(jit);

  auto t0 = Clock::now();
  I.kernels = kernels::lowerGraph(I.graph);
  I.stats.lowerMs = msSince(t0);
  I.stats.kernels = static_cast<int>(I.kernels.size());

  t0 = Clock::now();
  auto module = std::make_unique<llvm::Module>(I.graph.name().empty() ? "program" : I.graph.name(), jit.context());
  for (const kernels::Kernel& k : I.kernels) {
    renderKernel(*module, k, isa);
    I.stats.scratchBytes = std::max(I.stats.scratchBytes, kernelScratchBytes(k, isa, pool.threads()));
  }
  I.stats.renderMs = msSince(t0);

  CompileOptions co;
  co.pipeline = CompileOptions::Pipeline::Light;  // the renderer vectorizes and unrolls itself
  if (!options.dumpDir.empty()) {
    co.dumpDir = options.dumpDir;
    co.dumpStem = "program";
  }
  JitStats before = jit.stats();
  I.module = jit.compile(std::move(module), co);
  I.stats.cacheHit = jit.stats().cacheHits > before.cacheHits;
  I.stats.compileMs = I.stats.cacheHit ? 0 : I.module->compileMs();
  if (!options.dumpDir.empty()) writeKernelDumps(options.dumpDir);
  for (const kernels::Kernel& k : I.kernels) I.functions.push_back(I.module->fn<void(void**, void*)>(k.name));

  // Memory.
  std::unordered_map<const ir::Value*, int64_t> slots;
  if (const ir::MemoryPlan* plan = I.graph.plan()) {
    for (const ir::BufferSlot& s : plan->slots) slots.emplace(s.value, s.offset);
    I.stats.arenaBytes = plan->arenaBytes;
  }
  for (const ir::Param& p : I.graph.params()) {
    I.params.push_back(interp::initialize(p));
    I.stats.paramBytes += static_cast<int64_t>(I.params.back().bytes());
  }
  for (const ir::Value* v : I.graph.inputs()) I.place(v, slots);
  for (const ir::Param& p : I.graph.params()) I.place(p.value, slots);
  for (const kernels::Kernel& k : I.kernels)
    for (const kernels::Buffer& b : k.buffers) I.place(b.value, slots);
  for (const ir::Output& o : I.graph.outputs()) I.place(o.value, slots);
  for (const ir::Update& u : I.graph.updates()) I.place(u.value, slots);
  I.arena = rt::HostTensor(DType::boolean, {std::max<int64_t>(I.stats.arenaBytes, 1)});
  I.scratch = rt::HostTensor(DType::boolean, {std::max<int64_t>(I.stats.scratchBytes, 1)});
  I.inputs.assign(I.graph.inputs().size(), nullptr);
  I.tables.resize(I.kernels.size());
  return program;
}

interp::TensorMap Program::run(const interp::TensorMap& inputs) {
  Impl& I = *impl_;
  const auto& graphInputs = I.graph.inputs();
  for (size_t i = 0; i < graphInputs.size(); ++i) {
    const ir::Value* v = graphInputs[i];
    auto it = inputs.find(v->name);
    KILN_CHECK(it != inputs.end(), "missing input '{}' ({})", v->name, v->type.str());
    const rt::HostTensor& t = it->second;
    KILN_CHECK(t.dtype() == v->type.dtype && t.shape() == v->type.shape, "input '{}' is {}, expected {}", v->name,
               t.typeStr(), v->type.str());
    I.inputs[i] = const_cast<void*>(t.data());  // kernels never write inputs
  }
  rt::ThreadPool* pool = I.options.pool;
  for (size_t k = 0; k < I.kernels.size(); ++k) {
    std::vector<void*>& table = I.tables[k];
    table.clear();
    for (const kernels::Buffer& b : I.kernels[k].buffers) table.push_back(I.address(b.value));
    table.push_back(I.scratch.data());
    I.functions[k](table.data(), pool);
  }
  interp::TensorMap outputs;
  for (const ir::Output& o : I.graph.outputs()) {
    rt::HostTensor t(o.value->type.dtype, o.value->type.shape);
    std::memcpy(t.data(), I.address(o.value), t.bytes());
    outputs.insert_or_assign(o.name, std::move(t));
  }
  // New parameter values: an owned update buffer trades places with the parameter (its old
  // bytes become next step's update buffer); anything else (an input, another parameter, a value
  // that updates two parameters) is copied, before any trade changes what it reads.
  std::vector<std::pair<size_t, size_t>> trades;  // parameter, owned tensor
  std::vector<std::pair<size_t, rt::HostTensor>> copies;
  std::unordered_set<const ir::Value*> traded;
  for (const ir::Update& u : I.graph.updates()) {
    if (u.value == u.param) continue;
    size_t param = I.storage.at(u.param).index;
    const Storage& s = I.storage.at(u.value);
    if (s.kind == Storage::Kind::Own && traded.insert(u.value).second) {
      trades.emplace_back(param, s.index);
      continue;
    }
    rt::HostTensor t(u.value->type.dtype, u.value->type.shape);
    std::memcpy(t.data(), I.address(u.value), t.bytes());
    copies.emplace_back(param, std::move(t));
  }
  for (auto [param, own] : trades) std::swap(I.params[param], I.owned[own]);
  for (auto& [param, t] : copies) I.params[param] = std::move(t);
  return outputs;
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

std::vector<std::string> Program::kernelNames() const {
  std::vector<std::string> names;
  for (const kernels::Kernel& k : impl_->kernels) names.push_back(k.name);
  return names;
}

}  // namespace kiln::cpu
