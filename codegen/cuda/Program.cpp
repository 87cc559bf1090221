#include "codegen/cuda/Program.h"

#include "codegen/cuda/Layout.h"
#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/Render.h"
#include "kernels/Kernel.h"
#include "runtime/cuda/BlasLt.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Module.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/File.h"
#include "support/Parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
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

/// FNV-1a of the text: the key of compiled code (with the architecture and NVRTC's version).
uint64_t hashText(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// NVRTC parses the prelude again for every part (about 0.1 s of a cold compile on the development
/// machine, where a 5 KB GEMM kernel takes 0.3–0.6 s): parts hold at least this much kernel code.
constexpr size_t kPartCodeBytes = 8 << 10;

/// The layout's kernels (indices) in at most `most` parts of at least kPartCodeBytes of code each,
/// balanced by code size: largest first, each into the lightest part; each part in layout order.
std::vector<std::vector<size_t>> splitKernels(const std::vector<RenderedKernel>& ks, size_t most) {
  size_t total = 0;
  for (const RenderedKernel& k : ks) total += k.code.size();
  const size_t n = std::clamp<size_t>(std::min(total / kPartCodeBytes, ks.size()), 1, std::max<size_t>(most, 1));
  std::vector<size_t> order(ks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ks[a].code.size() > ks[b].code.size(); });
  std::vector<std::vector<size_t>> parts(n);
  std::vector<size_t> load(n, 0);
  for (size_t k : order) {
    const size_t j = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    parts[j].push_back(k);
    load[j] += ks[k].code.size();
  }
  for (std::vector<size_t>& p : parts) std::sort(p.begin(), p.end());
  return parts;
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

}  // namespace

std::string programSourceFor(const ir::Graph& graph, int sm, bool blasLt) {
  return layoutProgram(graph, sm, blasLt).source;
}

struct Program::Impl {
  ir::Graph graph;
  ProgramOptions options;
  ProgramStats stats;
  ProgramLayout layout;  // the kernels and where everything lives (Layout.h), bound below

  std::unique_ptr<gpu::Context> context;
  std::unique_ptr<gpu::BlasLt> blas;
  // The kernels' code in parts that NVRTC compiles side by side (splitKernels), a module each.
  std::vector<std::unique_ptr<gpu::Module>> modules;
  std::vector<size_t> moduleOfKernel;  // per kernel of the layout
  std::vector<gpu::DeviceBuffer> inputs, params, owned;
  gpu::DeviceBuffer arena, scratch;
  std::vector<gpu::PinnedHostBuffer> inputStaging, outputStaging;
  /// Per graph input: kept on the device (keepInputs), and uploaded by the current run (given to
  /// it); `replayUploads` is the latter when the replayed graph was captured.
  std::vector<char> kept, uploading, replayUploads;

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
  /// Update copies at the end of a run (ProgramLayout::updates): staged values go to
  /// `updateStaging` first, then every value (or its staging copy) to its parameter.
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
  // ProgramOptions::profile: an event when the inputs are up, one after each kernel's last step
  // (null for a kernel without steps), and the sums per kernel.
  std::unique_ptr<gpu::Event> stepsBegin;
  std::vector<std::unique_ptr<gpu::Event>> kernelEnds;
  std::vector<double> kernelMicros;
  int64_t profiledRuns = 0;

  CUdeviceptr address(const Location& at) const {
    switch (at.kind) {
      case Location::Kind::Input: return inputs[at.index].ptr();
      case Location::Kind::Param: return params[at.index].ptr();
      case Location::Kind::Arena: return arena.ptr() + static_cast<CUdeviceptr>(at.offset);
      case Location::Kind::Own: return owned[at.index].ptr();
      case Location::Kind::Scratch: return scratch.ptr() + static_cast<CUdeviceptr>(at.offset);
    }
    return 0;
  }

  /// One translation unit through the in-memory cache, the cache folder (ProgramOptions::cacheDir)
  /// or NVRTC; `hit` says whether a cache had it. Safe to call from several threads at once.
  std::shared_ptr<const CompiledCuda> compileSource(const std::string& source, const std::string& unit,
                                                    const std::string& arch, bool& hit) const {
    const uint64_t key = hashText(source) ^ (hashText(arch + nvrtcVersion()) * 31);
    CodeCache& cache = CodeCache::get();
    hit = true;
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (auto it = cache.entries.find(key); it != cache.entries.end()) return it->second;
    }
    namespace fs = std::filesystem;
    fs::path cached;
    if (!options.cacheDir.empty()) {
      cached = fs::path(options.cacheDir) / fmt::format("{:016x}.kcubin", key);
      // An entry that is not a whole, undamaged cubin (its hash differs, it is truncated) is
      // compiled again and replaced: a flipped byte of machine code would run on the device.
      const std::optional<std::string> bytes = unsealCacheEntry(readCacheFile(cached.string()));
      if (bytes && looksLikeElf64(*bytes)) {
        auto c = std::make_shared<CompiledCuda>();
        c->cubin.assign(bytes->begin(), bytes->end());
        std::lock_guard<std::mutex> lock(cache.mutex);
        return cache.entries.emplace(key, c).first->second;
      }
    }
    hit = false;
    auto c = std::make_shared<CompiledCuda>(compileCuda(source, unit, arch));
    if (!cached.empty()) writeCacheFile(cached.string(), sealCacheEntry(std::string(c->cubin.data(), c->cubin.size())));
    std::lock_guard<std::mutex> lock(cache.mutex);
    return cache.entries.emplace(key, c).first->second;
  }

  void dump(const std::string& source, const CompiledCuda& code) {
    namespace fs = std::filesystem;
    fs::path dir(options.dumpDir);
    fs::create_directories(dir / "kernels");
    writeFileAtomically((dir / "program.cu").string(), source);
    if (!code.ptx.empty()) writeFileAtomically((dir / "program.ptx").string(), code.ptx);
    std::map<std::string, std::string> ptx = ptxByKernel(code.ptx, layout.rendered);
    for (const RenderedKernel& k : layout.rendered) {
      writeFileAtomically((dir / "kernels" / (k.name + ".cu")).string(), k.code);
      if (auto it = ptx.find(k.name); it != ptx.end())
        writeFileAtomically((dir / "kernels" / (k.name + ".ptx")).string(), it->second);
    }
  }

  /// Binds every step of the layout to device addresses (all memory is allocated by now).
  void bindSteps() {
    for (const StepLayout& s : layout.steps) {
      BoundStep& b = steps.emplace_back();
      if (s.kind == Step::Kind::Launch) {
        b.kernel = modules[moduleOfKernel[s.kernel]]->kernel(s.entry);
        b.grid = {s.grid[0], s.grid[1], s.grid[2]};
        b.block = {s.block[0], s.block[1], s.block[2]};
        b.shared = s.sharedBytes;
        for (const Location& a : s.args) b.args.push_back(address(a));
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
        b.desc.inputType = m.typeA;
        b.desc.outputType = m.typeD;
        b.desc.epilogue = blasEpilogue(m.epilogue);
        b.operands.a = reinterpret_cast<const void*>(static_cast<uintptr_t>(address(s.a)));
        b.operands.b = reinterpret_cast<const void*>(static_cast<uintptr_t>(address(s.b)));
        b.operands.d = reinterpret_cast<void*>(static_cast<uintptr_t>(address(s.d)));
        if (m.bias >= 0) b.operands.bias = reinterpret_cast<void*>(static_cast<uintptr_t>(address(s.bias)));
      }
    }
    // Pointers into `args` only once every vector has its final size.
    for (BoundStep& b : steps)
      for (CUdeviceptr& a : b.args) b.argPointers.push_back(&a);
  }

  /// Graph input `i` in `inputs`, checked against its dtype and shape; null when not given.
  const rt::HostTensor* given(const interp::TensorMap& inputs, size_t i) const {
    const ir::Value* v = graph.inputs()[i];
    auto it = inputs.find(v->name);
    if (it == inputs.end()) return nullptr;
    const rt::HostTensor& t = it->second;
    KILN_CHECK(t.dtype() == v->type.dtype && t.shape() == v->type.shape, "input '{}' is {}, expected {}", v->name,
               t.typeStr(), v->type.str());
    return &t;
  }

  /// Enqueues one run's device work (uploads of the given inputs from the pinned staging, steps,
  /// downloads, updates).
  void enqueue() {
    gpu::Stream& s = context->stream();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (uploading[i]) s.upload(inputs[i].ptr(), inputStaging[i].data(), inputs[i].bytes());
    const bool profiling = options.profile;
    if (profiling) stepsBegin->record(s);
    for (size_t i = 0; i < steps.size(); ++i) {
      BoundStep& b = steps[i];
      if (b.kernel)
        b.kernel->launch(s, b.grid, b.block, b.shared, b.argPointers.data());
      else
        blas->matmul(b.desc, b.operands, s);
      const size_t kernel = layout.steps[i].kernel;
      if (profiling && (i + 1 == steps.size() || layout.steps[i + 1].kernel != kernel)) kernelEnds[kernel]->record(s);
    }
    // Outputs before updates: an output may live in a parameter's buffer (a view of it) and must
    // read the value from before this run's update.
    for (size_t i = 0; i < layout.outputs.size(); ++i)
      s.download(outputStaging[i].data(), address(layout.outputs[i]), outputStaging[i].bytes());
    for (const Copy& c : stageCopies) s.copy(c.dst, c.src, c.bytes);
    for (const Copy& c : updateCopies) s.copy(c.dst, c.src, c.bytes);
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
    impl_->modules.clear();
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
    impl_->stepsBegin.reset();
    impl_->kernelEnds.clear();
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

  bool blasLt = options.blasLt;
  int64_t blasMinMacs = options.blasMinMacs;
  if (const char* route = std::getenv("KILN_CUDA_GEMM"); route && *route) {
    const std::string r = route;
    KILN_CHECK(r == "auto" || r == "cublaslt" || r == "generated",
               "KILN_CUDA_GEMM='{}': expected auto, cublaslt or generated", r);
    if (r == "cublaslt") blasLt = true, blasMinMacs = 0;
    if (r == "generated") blasLt = false;
  }
  bool chain = options.chain && !options.profile;
  if (const char* c = std::getenv("KILN_CUDA_CHAIN"); c && *c) {
    const std::string v = c;
    KILN_CHECK(v == "0" || v == "1", "KILN_CUDA_CHAIN='{}': expected 0 or 1", v);
    chain = v == "1" && !options.profile;
  }
  I.layout = layoutProgram(I.graph, sm >= 90 ? 90 : 80, blasLt, blasMinMacs, chain);
  const ProgramLayout& L = I.layout;
  I.stats.lowerMs = L.lowerMs;
  I.stats.renderMs = L.renderMs;
  I.stats.kernels = static_cast<int>(L.kernels.size());
  I.stats.launches = L.launches;
  I.stats.blasCalls = L.blasCalls;
  I.stats.chains = L.chains;
  I.stats.arenaBytes = L.arenaBytes;
  I.stats.scratchBytes = L.scratchBytes;
  // NVRTC, in parts side by side (one when dumping: program.ptx is the whole program's), a module
  // each; a part's translation unit is the prelude and its kernels, as programSource makes it.
  const bool dumping = !options.dumpDir.empty();
  const std::vector<std::vector<size_t>> parts = splitKernels(L.rendered, dumping ? 1 : compileThreadLimit());
  const std::string unit = I.graph.name().empty() ? "program" : I.graph.name();
  std::vector<std::shared_ptr<const CompiledCuda>> code(parts.size());
  std::vector<char> hits(parts.size(), 0);
  auto t0 = Clock::now();
  forEachItem(parts.size(), parts.size(), [&](size_t i, size_t) {
    bool hit = false;
    const bool whole = parts.size() == 1;
    code[i] = I.compileSource(whole ? L.source : programSource(L.rendered, parts[i]),
                              whole ? unit + ".cu" : fmt::format("{}.part{}.cu", unit, i + 1), I.stats.arch, hit);
    hits[i] = hit;
  });
  I.stats.parts = static_cast<int>(parts.size());
  I.stats.cacheHit = std::all_of(hits.begin(), hits.end(), [](char h) { return h != 0; });
  I.stats.nvrtcMs = I.stats.cacheHit ? 0 : msSince(t0);
  if (dumping) I.dump(L.source, *code[0]);
  t0 = Clock::now();
  I.moduleOfKernel.assign(L.rendered.size(), 0);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string what = parts.size() == 1 ? fmt::format("program '{}'", I.graph.name())
                                               : fmt::format("program '{}', part {} of {}", I.graph.name(), i + 1,
                                                             parts.size());
    I.modules.push_back(std::make_unique<gpu::Module>(*I.context, code[i]->cubin, what));
    for (size_t k : parts[i]) I.moduleOfKernel[k] = i;
  }
  I.stats.loadMs = msSince(t0);

  // Memory: check that it fits, then allocate.
  int64_t need = alignDevice(L.arenaBytes) + alignDevice(L.scratchBytes);
  for (const ir::Value* v : I.graph.inputs()) need += alignDevice(v->type.bytes());
  for (const ir::Param& p : I.graph.params()) {
    need += alignDevice(p.value->type.bytes());
    I.stats.paramBytes += p.value->type.bytes();
  }
  for (const ProgramLayout::Owned& o : L.owned) need += alignDevice(o.type.bytes());
  need += int64_t(L.blasCalls) << 25;  // cuBLASLt's workspace (32 MiB), counted per product as before
  I.stats.deviceBytes = need;
  auto [freeBytes, totalBytes] = I.context->memoryInfo();
  KILN_CHECK(static_cast<uint64_t>(need) <= freeBytes,
             "the program '{}' needs {} bytes ({:.1f} MiB) of device memory; {} has {} bytes ({:.1f} MiB) free of {}",
             I.graph.name(), need, static_cast<double>(need) / (1 << 20), props.label(), freeBytes,
             static_cast<double>(freeBytes) / (1 << 20), totalBytes);

  gpu::Stream& stream = I.context->stream();
  I.arena = I.context->allocate(static_cast<size_t>(std::max<int64_t>(L.arenaBytes, 1)));
  I.scratch = I.context->allocate(static_cast<size_t>(std::max<int64_t>(L.scratchBytes, 1)));
  for (const ir::Value* v : I.graph.inputs()) {
    I.inputs.push_back(I.context->allocate(static_cast<size_t>(v->type.bytes())));
    I.inputStaging.emplace_back(static_cast<size_t>(std::max<int64_t>(v->type.bytes(), 1)));
  }
  I.kept.assign(I.inputs.size(), 0);
  I.uploading.assign(I.inputs.size(), 1);
  for (const ir::Param& p : I.graph.params()) {
    rt::HostTensor init = interp::initialize(p);
    I.params.push_back(I.context->allocate(init.bytes()));
    stream.upload(I.params.back().ptr(), init.data(), init.bytes());
  }
  for (const ProgramLayout::Owned& o : L.owned) {
    I.owned.push_back(I.context->allocate(static_cast<size_t>(o.type.bytes())));
    if (o.constant) stream.upload(I.owned.back().ptr(), o.value.data(), o.value.bytes());
  }
  for (const ir::Output& o : I.graph.outputs())
    I.outputStaging.emplace_back(static_cast<size_t>(std::max<int64_t>(o.value->type.bytes(), 1)));
  for (const ProgramLayout::UpdateCopy& u : L.updates) {
    const size_t bytes = static_cast<size_t>(u.bytes);
    CUdeviceptr dst = I.params[u.param].ptr(), src = I.address(u.value);
    if (u.staged) {
      I.updateStaging.push_back(I.context->allocate(bytes));
      I.stageCopies.push_back({I.updateStaging.back().ptr(), src, bytes});
      src = I.updateStaging.back().ptr();
    }
    I.updateCopies.push_back({dst, src, bytes});
  }
  if (L.usesBlas()) I.blas = std::make_unique<gpu::BlasLt>(*I.context);
  I.bindSteps();
  I.start = std::make_unique<gpu::Event>();
  I.stop = std::make_unique<gpu::Event>();
  if (options.profile) {
    I.stepsBegin = std::make_unique<gpu::Event>();
    I.kernelEnds.resize(L.kernels.size());
    for (const StepLayout& st : L.steps)
      if (!I.kernelEnds[st.kernel]) I.kernelEnds[st.kernel] = std::make_unique<gpu::Event>();
  }
  I.kernelMicros.assign(L.kernels.size(), 0.0);
  stream.synchronize();
  return program;
}

interp::TensorMap Program::run(const interp::TensorMap& inputs) {
  Impl& I = *impl_;
  I.context->makeCurrent();
  for (size_t i = 0; i < I.inputs.size(); ++i) {
    const rt::HostTensor* t = I.given(inputs, i);
    I.uploading[i] = t != nullptr;
    if (!t) {
      const ir::Value* v = I.graph.inputs()[i];
      KILN_CHECK(I.kept[i], "missing input '{}' ({}): neither given nor kept", v->name, v->type.str());
      continue;
    }
    rt::ThreadPool::global().copy(I.inputStaging[i].data(), t->data(), t->bytes());
  }
  gpu::Stream& s = I.context->stream();
  I.start->record(s);
  if (I.runs >= 1 && I.options.graphs && !I.options.profile) {
    // The replayed graph uploads the inputs its capture's run was given: captured again when a run
    // gives another set (keepInputs).
    if (I.replay && I.replayUploads != I.uploading) I.replay.reset();
    if (!I.replay) {
      I.replay.emplace(gpu::Graph::capture(s, [&] { I.enqueue(); }));
      I.replayUploads = I.uploading;
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
  if (I.options.profile) {
    // Kernels end in schedule order on the one stream: each one's time runs from the end before it.
    const gpu::Event* previous = I.stepsBegin.get();
    for (size_t k = 0; k < I.kernelMicros.size(); ++k) {
      if (!I.kernelEnds[k]) continue;
      I.kernelMicros[k] += 1e3 * gpu::Event::elapsedMs(*previous, *I.kernelEnds[k]);
      previous = I.kernelEnds[k].get();
    }
    ++I.profiledRuns;
  }
  interp::TensorMap outputs;
  const auto& outs = I.graph.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    rt::HostTensor t(outs[i].value->type.dtype, outs[i].value->type.shape);
    rt::ThreadPool::global().copy(t.data(), I.outputStaging[i].data(), t.bytes());
    outputs.insert_or_assign(outs[i].name, std::move(t));
  }
  return outputs;
}

void Program::keepInputs(const interp::TensorMap& inputs) {
  Impl& I = *impl_;
  I.context->makeCurrent();
  for (size_t i = 0; i < I.inputs.size(); ++i) {
    if (const rt::HostTensor* t = I.given(inputs, i)) {
      I.context->stream().upload(I.inputs[i].ptr(), t->data(), t->bytes());
      I.kept[i] = 1;
    }
  }
  I.context->synchronize();
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
const ProgramLayout& Program::layout() const { return impl_->layout; }
double Program::lastRunDeviceMs() const { return impl_->lastDeviceMs; }

std::vector<double> Program::kernelMicros() const { return impl_->kernelMicros; }

int64_t Program::profiledRuns() const { return impl_->profiledRuns; }

void Program::resetProfile() {
  std::fill(impl_->kernelMicros.begin(), impl_->kernelMicros.end(), 0.0);
  impl_->profiledRuns = 0;
}

std::vector<std::string> Program::kernelNames() const {
  std::vector<std::string> names;
  for (const kernels::Kernel& k : impl_->layout.kernels) names.push_back(k.name);
  return names;
}

void clearCodeCache() {
  CodeCache& cache = CodeCache::get();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.entries.clear();
}

}  // namespace kiln::cuda
