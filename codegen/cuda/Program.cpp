#include "codegen/cuda/Program.h"

#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Render.h"
#include "kernels/Kernel.h"
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Module.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace kiln::cuda {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr int64_t kAlign = 256;  // device buffers and scratch areas start at multiples of this
int64_t alignUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::vector<RenderedKernel> renderAll(const std::vector<kernels::Kernel>& ks, int sm, bool blasLt) {
  RenderOptions o;
  o.sm = sm;
  o.blasLt = blasLt;
  std::vector<RenderedKernel> out;
  for (const kernels::Kernel& k : ks) out.push_back(renderKernel(k, o));
  return out;
}

/// FNV-1a of the text: the key of compiled code (with the architecture and NVRTC's version).
uint64_t hashText(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// NVRTC output by source hash: programs built again in one process (an inference graph per batch
/// size in `kiln train`, benchmarks) compile once.
struct CodeCache {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<const CompiledCuda>> entries;
  static CodeCache& get() {
    static CodeCache cache;
    return cache;
  }
};

/// Splits NVRTC's PTX into each kernel's entry points (".visible .entry NAME…(" to the closing
/// brace at column 0), by the kernel whose name prefixes the entry.
std::map<std::string, std::string> ptxByKernel(const std::string& ptx, const std::vector<RenderedKernel>& ks) {
  std::map<std::string, std::string> parts;
  std::istringstream in(ptx);
  std::string line, current;
  while (std::getline(in, line)) {
    if (auto at = line.find(".entry "); at != std::string::npos) {
      std::string entry = line.substr(at + 7);
      entry = entry.substr(0, entry.find('('));
      current.clear();
      for (const RenderedKernel& k : ks)
        if (entry.rfind(k.name, 0) == 0 && k.name.size() > current.size()) current = k.name;
    }
    if (!current.empty()) parts[current] += line + "\n";
    if (line == "}") current.clear();
  }
  return parts;
}

gpu::Epilogue blasEpilogue(BlasMatmul::Epilogue e) {
  switch (e) {
    case BlasMatmul::Epilogue::None: return gpu::Epilogue::none;
    case BlasMatmul::Epilogue::Relu: return gpu::Epilogue::relu;
    case BlasMatmul::Epilogue::Gelu: return gpu::Epilogue::gelu;
    case BlasMatmul::Epilogue::Bias: return gpu::Epilogue::bias;
    case BlasMatmul::Epilogue::BiasRelu: return gpu::Epilogue::biasRelu;
    case BlasMatmul::Epilogue::BiasGelu: return gpu::Epilogue::biasGelu;
  }
  return gpu::Epilogue::none;
}

/// Where a value's bytes live on the device.
struct Storage {
  enum class Kind : uint8_t { Input, Param, Arena, Own } kind;
  size_t index = 0;    // Input: graph input; Param: graph parameter; Own: owned buffer
  int64_t offset = 0;  // Arena
};

}  // namespace

std::string programSourceFor(const ir::Graph& graph, int sm, bool blasLt) {
  return programSource(renderAll(kernels::lowerGraph(graph), sm, blasLt));
}

struct Program::Impl {
  ir::Graph graph;
  ProgramOptions options;
  ProgramStats stats;
  std::vector<kernels::Kernel> kernels;
  std::vector<RenderedKernel> rendered;

  std::unique_ptr<gpu::Context> context;
  std::unique_ptr<gpu::BlasLt> blas;
  std::unique_ptr<gpu::Module> module;
  std::unordered_map<const ir::Value*, Storage> storage;
  std::vector<gpu::DeviceBuffer> inputs, params, owned;
  gpu::DeviceBuffer arena, scratch;
  std::vector<gpu::PinnedHostBuffer> inputStaging, outputStaging;

  /// One step of a run, bound to device addresses once at compile time.
  struct BoundStep {
    std::optional<gpu::Kernel> kernel;
    gpu::Dim3 grid, block;
    unsigned shared = 0;
    std::vector<CUdeviceptr> args;
    std::vector<void*> argPointers;
    const BlasMatmul* blas = nullptr;
    gpu::MatmulDesc desc;
    gpu::MatmulOperands operands;
  };
  std::vector<BoundStep> steps;
  /// Update copies at the end of a run: value → parameter; values that are themselves parameters
  /// or inputs go through `updateStaging` first so no copy reads a parameter already overwritten.
  struct Copy {
    CUdeviceptr dst, src;
    size_t bytes;
  };
  std::vector<Copy> stageCopies, updateCopies;
  std::vector<gpu::DeviceBuffer> updateStaging;

  std::optional<gpu::Graph> replay;
  int runs = 0;
  std::unique_ptr<gpu::Event> start, stop;
  double lastDeviceMs = 0;

  CUdeviceptr address(const ir::Value* v) const {
    const Storage& s = storage.at(v);
    switch (s.kind) {
      case Storage::Kind::Input: return inputs[s.index].ptr();
      case Storage::Kind::Param: return params[s.index].ptr();
      case Storage::Kind::Arena: return arena.ptr() + static_cast<CUdeviceptr>(s.offset);
      case Storage::Kind::Own: return owned[s.index].ptr();
    }
    return 0;
  }

  /// Decides where `v` lives; owned buffers are counted in `ownBytes` and allocated later.
  void place(const ir::Value* v, const std::unordered_map<const ir::Value*, int64_t>& slots,
             std::vector<const ir::Value*>& ownValues) {
    if (storage.count(v)) return;
    if (v->kind == ir::ValueKind::Input) {
      const auto& ins = graph.inputs();
      storage[v] = {Storage::Kind::Input, static_cast<size_t>(std::find(ins.begin(), ins.end(), v) - ins.begin())};
      return;
    }
    if (v->kind == ir::ValueKind::Param) {
      for (size_t i = 0; i < graph.params().size(); ++i)
        if (graph.params()[i].value == v) storage[v] = {Storage::Kind::Param, i};
      return;
    }
    const bool constant = v->producer && v->producer->op == ir::OpKind::Constant;
    if (auto it = slots.find(v); it != slots.end() && !constant) {
      storage[v] = {Storage::Kind::Arena, 0, it->second};
      return;
    }
    storage[v] = {Storage::Kind::Own, ownValues.size()};
    ownValues.push_back(v);
  }

  std::shared_ptr<const CompiledCuda> compileSource(const std::string& source, const std::string& arch) {
    const uint64_t key = hashText(source) ^ (hashText(arch + nvrtcVersion()) * 31);
    CodeCache& cache = CodeCache::get();
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (auto it = cache.entries.find(key); it != cache.entries.end()) {
        stats.cacheHit = true;
        return it->second;
      }
    }
    namespace fs = std::filesystem;
    fs::path cached;
    if (!options.cacheDir.empty()) {
      cached = fs::path(options.cacheDir) / fmt::format("{:016x}.cubin", key);
      if (fs::exists(cached)) {
        auto c = std::make_shared<CompiledCuda>();
        std::string bytes = readTextFile(cached.string());
        c->cubin.assign(bytes.begin(), bytes.end());
        stats.cacheHit = true;
        std::lock_guard<std::mutex> lock(cache.mutex);
        return cache.entries.emplace(key, c).first->second;
      }
    }
    auto t0 = Clock::now();
    auto c = std::make_shared<CompiledCuda>(
        compileCuda(source, graph.name().empty() ? "program.cu" : graph.name() + ".cu", arch));
    stats.nvrtcMs = msSince(t0);
    if (!cached.empty()) {
      fs::create_directories(cached.parent_path());
      writeFileAtomically(cached.string(), std::string(c->cubin.begin(), c->cubin.end()));
    }
    std::lock_guard<std::mutex> lock(cache.mutex);
    return cache.entries.emplace(key, c).first->second;
  }

  void dump(const std::string& source, const CompiledCuda& code) {
    namespace fs = std::filesystem;
    fs::path dir(options.dumpDir);
    fs::create_directories(dir / "kernels");
    writeFileAtomically((dir / "program.cu").string(), source);
    if (!code.ptx.empty()) writeFileAtomically((dir / "program.ptx").string(), code.ptx);
    std::map<std::string, std::string> ptx = ptxByKernel(code.ptx, rendered);
    for (const RenderedKernel& k : rendered) {
      writeFileAtomically((dir / "kernels" / (k.name + ".cu")).string(), k.code);
      if (auto it = ptx.find(k.name); it != ptx.end())
        writeFileAtomically((dir / "kernels" / (k.name + ".ptx")).string(), it->second);
    }
  }

  void bindSteps() {
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      const kernels::Kernel& k = kernels[ki];
      const RenderedKernel& r = rendered[ki];
      std::vector<int64_t> areaOffsets;
      int64_t off = 0;
      for (int64_t bytes : r.scratchBytes) {
        areaOffsets.push_back(off);
        off += alignUp(bytes);
      }
      auto ref = [&](BufferRef b) -> CUdeviceptr {
        const size_t nb = k.buffers.size();
        if (b >= 0 && static_cast<size_t>(b) < nb) return address(k.buffers[static_cast<size_t>(b)].value);
        const size_t area = static_cast<size_t>(b) - nb;
        KILN_CHECK(b >= 0 && area < areaOffsets.size(), "kernel '{}': a step refers to buffer {} of {} (+{} scratch)",
                   k.name, b, nb, areaOffsets.size());
        return scratch.ptr() + static_cast<CUdeviceptr>(areaOffsets[area]);
      };
      for (const Step& s : r.steps) {
        BoundStep& b = steps.emplace_back();
        if (s.kind == Step::Kind::Launch) {
          const Launch& l = s.launch;
          b.kernel = module->kernel(l.entry);
          b.grid = {static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]), static_cast<unsigned>(l.grid[2])};
          b.block = {static_cast<unsigned>(l.block[0]), static_cast<unsigned>(l.block[1]),
                     static_cast<unsigned>(l.block[2])};
          b.shared = static_cast<unsigned>(l.sharedBytes);
          for (BufferRef a : l.args) b.args.push_back(ref(a));
          ++stats.launches;
        } else {
          const BlasMatmul& m = s.blas;
          b.blas = &m;
          b.desc.m = m.m;
          b.desc.n = m.n;
          b.desc.k = m.k;
          b.desc.transA = m.transA;
          b.desc.transB = m.transB;
          b.desc.batch = static_cast<int32_t>(m.batch);
          b.desc.strideA = m.strideA;
          b.desc.strideB = m.strideB;
          b.desc.strideD = m.strideD;
          KILN_CHECK(m.typeA == m.typeB, "kernel '{}': cuBLASLt operands of two types ({} and {})", k.name,
                     dtypeName(m.typeA), dtypeName(m.typeB));
          b.desc.inputType = m.typeA;
          b.desc.outputType = m.typeD;
          b.desc.epilogue = blasEpilogue(m.epilogue);
          b.operands.a = reinterpret_cast<const void*>(static_cast<uintptr_t>(ref(m.a)));
          b.operands.b = reinterpret_cast<const void*>(static_cast<uintptr_t>(ref(m.b)));
          b.operands.d = reinterpret_cast<void*>(static_cast<uintptr_t>(ref(m.d)));
          if (m.bias >= 0) b.operands.bias = reinterpret_cast<void*>(static_cast<uintptr_t>(ref(m.bias)));
          ++stats.blasCalls;
        }
      }
    }
    // Pointers into `args` only once every vector has its final size.
    for (BoundStep& b : steps)
      for (CUdeviceptr& a : b.args) b.argPointers.push_back(&a);
  }

  /// Enqueues one run's device work (uploads from the pinned staging, steps, updates, downloads).
  void enqueue() {
    gpu::Stream& s = context->stream();
    for (size_t i = 0; i < inputs.size(); ++i) s.upload(inputs[i].ptr(), inputStaging[i].data(), inputs[i].bytes());
    for (BoundStep& b : steps) {
      if (b.kernel)
        b.kernel->launch(s, b.grid, b.block, b.shared, b.argPointers.data());
      else
        blas->matmul(b.desc, b.operands, s);
    }
    for (const Copy& c : stageCopies) s.copy(c.dst, c.src, c.bytes);
    for (const Copy& c : updateCopies) s.copy(c.dst, c.src, c.bytes);
    const auto& outs = graph.outputs();
    for (size_t i = 0; i < outs.size(); ++i)
      s.download(outputStaging[i].data(), address(outs[i].value), outputStaging[i].bytes());
  }
};

Program::Program() : impl_(std::make_unique<Impl>()) {}
Program::~Program() {
  if (impl_ && impl_->context) {
    // Device objects go before the context; the stream's work must be done first.
    impl_->context->makeCurrent();
    impl_->context->synchronize();
    impl_->replay.reset();
    impl_->steps.clear();
    impl_->module.reset();
    impl_->blas.reset();
    impl_->inputs.clear();
    impl_->params.clear();
    impl_->owned.clear();
    impl_->updateStaging.clear();
    impl_->arena.reset();
    impl_->scratch.reset();
    impl_->inputStaging.clear();
    impl_->outputStaging.clear();
    impl_->start.reset();
    impl_->stop.reset();
    impl_->context.reset();
  }
}

std::unique_ptr<Program> Program::compile(const ir::Graph& graph, const ProgramOptions& options) {
  std::unique_ptr<Program> program(new Program());
  Impl& I = *program->impl_;
  I.graph = graph.clone();
  I.options = options;
  I.context = std::make_unique<gpu::Context>(options.device);
  const gpu::DeviceProperties& props = I.context->properties();
  I.stats.arch = props.arch();
  const int sm = props.ccMajor * 10 + props.ccMinor;

  auto t0 = Clock::now();
  I.kernels = kernels::lowerGraph(I.graph);
  I.stats.lowerMs = msSince(t0);
  I.stats.kernels = static_cast<int>(I.kernels.size());
  t0 = Clock::now();
  I.rendered = renderAll(I.kernels, sm >= 90 ? 90 : 80, options.blasLt);
  const std::string source = programSource(I.rendered);
  I.stats.renderMs = msSince(t0);
  std::shared_ptr<const CompiledCuda> code = I.compileSource(source, I.stats.arch);
  if (!options.dumpDir.empty()) I.dump(source, *code);
  t0 = Clock::now();
  I.module = std::make_unique<gpu::Module>(*I.context, code->cubin, fmt::format("program '{}'", I.graph.name()));
  I.stats.loadMs = msSince(t0);

  // Memory: decide where everything lives, check that it fits, then allocate.
  std::unordered_map<const ir::Value*, int64_t> slots;
  if (const ir::MemoryPlan* plan = I.graph.plan()) {
    for (const ir::BufferSlot& s : plan->slots) slots.emplace(s.value, s.offset);
    I.stats.arenaBytes = plan->arenaBytes;
  }
  std::vector<const ir::Value*> ownValues;
  for (const ir::Value* v : I.graph.inputs()) I.place(v, slots, ownValues);
  for (const ir::Param& p : I.graph.params()) I.place(p.value, slots, ownValues);
  for (const kernels::Kernel& k : I.kernels)
    for (const kernels::Buffer& b : k.buffers) I.place(b.value, slots, ownValues);
  for (const ir::Output& o : I.graph.outputs()) I.place(o.value, slots, ownValues);
  for (const ir::Update& u : I.graph.updates()) I.place(u.value, slots, ownValues);
  for (const RenderedKernel& r : I.rendered) {
    int64_t bytes = 0;
    for (int64_t b : r.scratchBytes) bytes += alignUp(b);
    I.stats.scratchBytes = std::max(I.stats.scratchBytes, bytes);
  }
  int64_t need = alignUp(I.stats.arenaBytes) + alignUp(I.stats.scratchBytes);
  for (const ir::Value* v : I.graph.inputs()) need += alignUp(v->type.bytes());
  for (const ir::Param& p : I.graph.params()) {
    need += alignUp(p.value->type.bytes());
    I.stats.paramBytes += p.value->type.bytes();
  }
  for (const ir::Value* v : ownValues) need += alignUp(v->type.bytes());
  for (const RenderedKernel& r : I.rendered)
    for (const Step& s : r.steps)
      if (s.kind == Step::Kind::Blas) need += int64_t(32) << 20;  // cuBLASLt's workspace, once
  I.stats.deviceBytes = need;
  auto [freeBytes, totalBytes] = I.context->memoryInfo();
  KILN_CHECK(static_cast<uint64_t>(need) <= freeBytes,
             "the program '{}' needs {} bytes ({:.1f} MiB) of device memory; {} has {} bytes ({:.1f} MiB) free of {}",
             I.graph.name(), need, static_cast<double>(need) / (1 << 20), props.label(), freeBytes,
             static_cast<double>(freeBytes) / (1 << 20), totalBytes);

  gpu::Stream& stream = I.context->stream();
  I.arena = I.context->allocate(static_cast<size_t>(std::max<int64_t>(I.stats.arenaBytes, 1)));
  I.scratch = I.context->allocate(static_cast<size_t>(std::max<int64_t>(I.stats.scratchBytes, 1)));
  for (const ir::Value* v : I.graph.inputs()) {
    I.inputs.push_back(I.context->allocate(static_cast<size_t>(v->type.bytes())));
    I.inputStaging.emplace_back(static_cast<size_t>(std::max<int64_t>(v->type.bytes(), 1)));
  }
  for (const ir::Param& p : I.graph.params()) {
    rt::HostTensor init = interp::initialize(p);
    I.params.push_back(I.context->allocate(init.bytes()));
    stream.upload(I.params.back().ptr(), init.data(), init.bytes());
  }
  for (const ir::Value* v : ownValues) {
    I.owned.push_back(I.context->allocate(static_cast<size_t>(v->type.bytes())));
    if (v->producer && v->producer->op == ir::OpKind::Constant) {
      rt::HostTensor t(v->type.dtype, v->type.shape);
      const std::vector<double>& values = v->producer->attrFloats("value");
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values.size() == 1 ? values[0] : values[static_cast<size_t>(i)]);
      stream.upload(I.owned.back().ptr(), t.data(), t.bytes());
    }
  }
  for (const ir::Output& o : I.graph.outputs())
    I.outputStaging.emplace_back(static_cast<size_t>(std::max<int64_t>(o.value->type.bytes(), 1)));
  for (const ir::Update& u : I.graph.updates()) {
    if (u.value == u.param) continue;
    const size_t bytes = static_cast<size_t>(u.value->type.bytes());
    CUdeviceptr dst = I.address(u.param), src = I.address(u.value);
    Storage::Kind kind = I.storage.at(u.value).kind;
    if (kind == Storage::Kind::Param || kind == Storage::Kind::Input) {
      I.updateStaging.push_back(I.context->allocate(bytes));
      I.stageCopies.push_back({I.updateStaging.back().ptr(), src, bytes});
      src = I.updateStaging.back().ptr();
    }
    I.updateCopies.push_back({dst, src, bytes});
  }
  bool anyBlas = false;
  for (const RenderedKernel& r : I.rendered)
    for (const Step& s : r.steps) anyBlas = anyBlas || s.kind == Step::Kind::Blas;
  if (anyBlas) I.blas = std::make_unique<gpu::BlasLt>(*I.context);
  I.bindSteps();
  I.start = std::make_unique<gpu::Event>();
  I.stop = std::make_unique<gpu::Event>();
  stream.synchronize();
  return program;
}

interp::TensorMap Program::run(const interp::TensorMap& inputs) {
  Impl& I = *impl_;
  I.context->makeCurrent();
  const auto& graphInputs = I.graph.inputs();
  for (size_t i = 0; i < graphInputs.size(); ++i) {
    const ir::Value* v = graphInputs[i];
    auto it = inputs.find(v->name);
    KILN_CHECK(it != inputs.end(), "missing input '{}' ({})", v->name, v->type.str());
    const rt::HostTensor& t = it->second;
    KILN_CHECK(t.dtype() == v->type.dtype && t.shape() == v->type.shape, "input '{}' is {}, expected {}", v->name,
               t.typeStr(), v->type.str());
    std::memcpy(I.inputStaging[i].data(), t.data(), t.bytes());
  }
  gpu::Stream& s = I.context->stream();
  I.start->record(s);
  if (I.runs >= 1 && I.options.graphs) {
    if (!I.replay) {
      I.replay.emplace(gpu::Graph::capture(s, [&] { I.enqueue(); }));
      I.stats.graphNodes = I.replay->nodeCount();
    }
    I.replay->launch(s);
  } else {
    I.enqueue();
  }
  I.stop->record(s);
  s.synchronize();
  ++I.runs;
  I.lastDeviceMs = gpu::Event::elapsedMs(*I.start, *I.stop);
  interp::TensorMap outputs;
  const auto& outs = I.graph.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    rt::HostTensor t(outs[i].value->type.dtype, outs[i].value->type.shape);
    std::memcpy(t.data(), I.outputStaging[i].data(), t.bytes());
    outputs.insert_or_assign(outs[i].name, std::move(t));
  }
  return outputs;
}

void Program::setParams(const interp::TensorMap& params) {
  Impl& I = *impl_;
  I.context->makeCurrent();
  for (const auto& [name, t] : params) {
    size_t i = 0;
    for (; i < I.graph.params().size(); ++i)
      if (I.graph.params()[i].value->name == name) break;
    KILN_CHECK(i < I.graph.params().size(), "the program has no parameter '{}'", name);
    const ir::TensorType& type = I.graph.params()[i].value->type;
    KILN_CHECK(t.dtype() == type.dtype && t.shape() == type.shape, "parameter '{}' is {}, expected {}", name,
               t.typeStr(), type.str());
    I.context->stream().upload(I.params[i].ptr(), t.data(), t.bytes());
  }
  I.context->synchronize();
}

interp::TensorMap Program::params() const {
  const Impl& I = *impl_;
  I.context->makeCurrent();
  interp::TensorMap out;
  std::vector<rt::HostTensor> host;
  for (size_t i = 0; i < I.graph.params().size(); ++i) {
    const ir::Value* v = I.graph.params()[i].value;
    host.emplace_back(v->type.dtype, v->type.shape);
    I.context->stream().download(host.back().data(), I.params[i].ptr(), host.back().bytes());
  }
  I.context->synchronize();
  for (size_t i = 0; i < host.size(); ++i) out.insert_or_assign(I.graph.params()[i].value->name, std::move(host[i]));
  return out;
}

const ir::Graph& Program::graph() const { return impl_->graph; }
const ProgramStats& Program::stats() const { return impl_->stats; }
double Program::lastRunDeviceMs() const { return impl_->lastDeviceMs; }

std::vector<std::string> Program::kernelNames() const {
  std::vector<std::string> names;
  for (const kernels::Kernel& k : impl_->kernels) names.push_back(k.name);
  return names;
}

}  // namespace kiln::cuda
