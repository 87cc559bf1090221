#include "cost/Explain.h"

#include "codegen/cpu/Program.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/Json.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

namespace kiln::cost {
namespace {

using Clock = std::chrono::steady_clock;

interp::TensorMap explainInputs(const ir::Graph& g) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  interp::TensorMap in;
  for (const ir::Value* v : g.inputs()) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    const bool scalar = t.numel() == 1 && v->type.shape.empty();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (isFloat(v->type.dtype))
        t.set(i, scalar ? 1e-3 : dist(rng));  // a scalar float input is a learning rate or a scale
      else
        t.set(i, static_cast<double>(i % 2));  // labels and indices: valid for any class count above 1
    }
    in.emplace(v->name, std::move(t));
  }
  return in;
}

std::string percent(double error) { return fmt::format("{:+.0f} %", 100 * error); }

}  // namespace

ExplainGraph explainGraph(const ExplainOptions& o) {
  ExplainGraph out;
  const passes::Precision precision = passes::precisionFromName(o.precision);
  passes::PassContext ctx;
  ctx.warn = [&](const std::string& w) { out.warnings.push_back(w); };
  const bool file = namesKirFile(o.model);
  if (file) {
    KILN_CHECK(!o.train, "--train applies to zoo models; a .kir file is explained as it is (export a training step "
                         "with `kiln export MODEL --train`)");
    out.graph = ir::parseGraphFile(o.model);
    ctx.precision = precision;
    out.title = fmt::format("{}, {}", std::filesystem::path(o.model).filename().string(), o.precision);
  } else {
    KILN_CHECK(o.batch >= 1, "the batch size must be positive, got {}", o.batch);
    Model spec = zooModel(o.model, {.batch = o.batch, .seed = o.seed});
    if (o.train) {
      passes::TrainingStepOptions to;
      to.optimizer.kind = passes::optimizerKindFromName(o.optimizer);
      to.precision = precision;  // the step applies it (amp, and loss scaling for f16)
      out.graph = buildTrainStep(spec, to, o.batch, &out.warnings);
      out.title = fmt::format("{}, training step ({}), batch {}, {}", o.model, o.optimizer, o.batch, o.precision);
    } else {
      out.graph = buildInference(spec, o.batch);
      ctx.precision = precision;
      out.title = fmt::format("{}, inference, batch {}, {}", o.model, o.batch, o.precision);
    }
  }
  passes::compileGraph(out.graph, ctx);
  return out;
}

Measurement measureOnCpu(const ir::Graph& compiled, double seconds) {
  cpu::ProgramOptions po;
  po.profile = true;
  const auto t0 = Clock::now();
  std::unique_ptr<cpu::Program> p = cpu::Program::compile(compiled, po);
  Measurement m;
  m.compileMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const interp::TensorMap in = explainInputs(p->graph());
  for (int i = 0; i < 3; ++i) p->run(in);  // warm: pages, caches, the pool's threads
  // Each run timed alone and each kernel's fastest run kept: on a shared machine, other load only
  // adds time, and a run it does not hit shows what the kernel costs (the profile's probes are
  // measured the same way).
  const size_t n = p->kernelNames().size();
  m.kernelMicros.assign(n, 1e300);
  m.stepMicros = 1e300;
  const auto s0 = Clock::now();
  do {
    p->resetProfile();
    const auto r0 = Clock::now();
    p->run(in);
    m.stepMicros = std::min(m.stepMicros, std::chrono::duration<double, std::micro>(Clock::now() - r0).count());
    const std::vector<double> us = p->kernelMicros();
    for (size_t k = 0; k < n; ++k) m.kernelMicros[k] = std::min(m.kernelMicros[k], us[k]);
    ++m.runs;
  } while ((std::chrono::duration<double>(Clock::now() - s0).count() < seconds || m.runs < 10) && m.runs < 1000000);
  return m;
}

ExplainReport explain(const ExplainOptions& options, const CpuProfile& cpu, const GpuProfile* gpu,
                      const std::string& noGpuReason) {
  ExplainGraph g = explainGraph(options);
  ExplainReport r;
  r.title = g.title;
  r.cpuLabel = fmt::format("{}, {} thread{}, {}", cpu.identity.model, cpu.identity.threads,
                           cpu.identity.threads > 1 ? "s" : "", cpu.identity.isa);
  r.gpuLabel = gpu ? fmt::format("{} ({})", gpu->name, gpu->source) : noGpuReason;
  r.cost = predictProgram(g.graph, cpu, gpu, options.cost);
  r.verdict = verdict(r.cost, cpu);
  if (options.measure) {
    r.measured = measureOnCpu(g.graph, options.measureSeconds);
    KILN_ASSERT(r.measured->kernelMicros.size() == r.cost.kernels.size(), "the program has {} kernels, the model {}",
                r.measured->kernelMicros.size(), r.cost.kernels.size());
    double measured = 0;
    for (double us : r.measured->kernelMicros) measured += us;
    r.kernelError = (r.cost.cpuKernelMicros - measured) / std::max(measured, 1e-9);
    r.stepError = (r.cost.cpuStepMicros - r.measured->stepMicros) / std::max(r.measured->stepMicros, 1e-9);
  }
  return r;
}

std::string explainText(const ExplainReport& r) {
  const ProgramCost& c = r.cost;
  const bool gpu = c.hasGpu;
  const bool meas = r.measured.has_value();
  std::string out = fmt::format("{}: {} kernels, {}, {} moved\n", r.title, c.kernels.size(), flopText(c.flops),
                                byteText(static_cast<double>(c.bytes)));
  out += fmt::format("cpu: {}\ngpu: {}\n\n", r.cpuLabel, r.gpuLabel);
  size_t nameWidth = 6;
  for (const KernelCost& k : c.kernels) nameWidth = std::max(nameWidth, std::min<size_t>(k.name.size(), 40));
  std::string header = fmt::format("{:>3}  {:<{}}  {:>10}  {:>9}  {:>3}  {:>9}  {:<8}", "#", "kernel", nameWidth, "FLOPs",
                                   "bytes", "thr", "cpu µs", "bound");
  if (meas) header += fmt::format("  {:>9}  {:>6}", "meas µs", "error");
  if (gpu) header += fmt::format("  {:>9}  {:<8}", "gpu µs", "bound");
  out += header + "\n";
  for (size_t i = 0; i < c.kernels.size(); ++i) {
    const KernelCost& k = c.kernels[i];
    std::string name = k.name.size() > 40 ? k.name.substr(0, 39) + "…" : k.name;
    std::string line = fmt::format("{:>3}  {:<{}}  {:>10}  {:>9}  {:>3}  {:>9.1f}  {:<8}", i, name, nameWidth,
                                   flopText(k.flops), byteText(static_cast<double>(k.bytes)), k.cpu.threads,
                                   k.cpu.micros, boundName(k.cpu.bound));
    if (meas) {
      const double m = r.measured->kernelMicros[i];
      line += fmt::format("  {:>9.1f}  {:>6}", m, percent((k.cpu.micros - m) / std::max(m, 1e-9)));
    }
    if (gpu) line += fmt::format("  {:>9.1f}  {:<8}", k.gpu->micros, boundName(k.gpu->bound));
    out += line + "\n";
  }
  // The step beyond the kernels: Program::run on the CPU; the transfers and the replay on the GPU.
  std::string extra = fmt::format("{:>3}  {:<{}}  {:>10}  {:>9}  {:>3}  {:>9.1f}  {:<8}", "", "run: inputs, outputs",
                                  nameWidth, "", byteText(static_cast<double>(c.inputBytes + c.outputBytes)), "",
                                  c.cpuRunMicros, "-");
  if (meas) {
    double kernels = 0;
    for (double us : r.measured->kernelMicros) kernels += us;
    extra += fmt::format("  {:>9.1f}  {:>6}", r.measured->stepMicros - kernels, "");
  }
  if (gpu) extra += fmt::format("  {:>9.1f}  {:<8}", c.gpuTransferMicros, "transfer");
  out += extra + "\n";
  std::string total = fmt::format("{:>3}  {:<{}}  {:>10}  {:>9}  {:>3}  {:>9.1f}  {:<8}", "", "step", nameWidth,
                                  flopText(c.flops), byteText(static_cast<double>(c.bytes)), "", c.cpuStepMicros, "");
  if (meas) total += fmt::format("  {:>9.1f}  {:>6}", r.measured->stepMicros, percent(r.stepError));
  if (gpu) total += fmt::format("  {:>9.1f}  {:<8}", c.gpuStepMicros, "");
  out += total + "\n\n";
  if (meas)
    out += fmt::format("measured: {} runs (each kernel's fastest), kernels {} predicted against {} measured ({}), step {} "
                       "({})\n",
                       r.measured->runs, timeText(c.cpuKernelMicros),
                       timeText(c.cpuKernelMicros / (1 + r.kernelError)), percent(r.kernelError),
                       timeText(r.measured->stepMicros), percent(r.stepError));
  if (gpu)
    out += fmt::format("gpu: {} launches ({} in launch costs), {} of transfer per step{}\n", c.gpuLaunches,
                       timeText(c.gpuLaunchMicros), byteText(static_cast<double>(c.inputBytes + c.outputBytes)),
                       c.cudaGraphs ? ", replayed as a CUDA graph" : "");
  out += "verdict: " + r.verdict.line + "\n";
  return out;
}

std::string explainJson(const ExplainReport& r) {
  const ProgramCost& c = r.cost;
  auto num = [](double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string("null"); };
  std::string out = "{\n";
  out += fmt::format("  \"title\": {},\n  \"cpu\": {},\n  \"gpu\": {},\n", rt::json::quote(r.title),
                     rt::json::quote(r.cpuLabel), rt::json::quote(r.gpuLabel));
  out += fmt::format("  \"flops\": {},\n  \"bytes\": {},\n  \"cpu_step_us\": {},\n  \"cpu_run_us\": {},\n", num(c.flops),
                     c.bytes, num(c.cpuStepMicros), num(c.cpuRunMicros));
  out += fmt::format("  \"inputs\": {},\n  \"input_bytes\": {},\n  \"outputs\": {},\n  \"output_bytes\": {},\n"
                     "  \"updates\": {},\n  \"update_bytes\": {},\n",
                     c.inputs, c.inputBytes, c.outputs, c.outputBytes, c.updates, c.updateBytes);
  if (c.hasGpu)
    out += fmt::format("  \"gpu_step_us\": {},\n  \"gpu_transfer_us\": {},\n  \"gpu_launches\": {},\n",
                       num(c.gpuStepMicros), num(c.gpuTransferMicros), c.gpuLaunches);
  if (r.measured)
    out += fmt::format("  \"measured_step_us\": {},\n  \"kernel_error\": {},\n  \"step_error\": {},\n",
                       num(r.measured->stepMicros), num(r.kernelError), num(r.stepError));
  out += fmt::format("  \"verdict\": {},\n  \"kernels\": [\n", rt::json::quote(r.verdict.line));
  for (size_t i = 0; i < c.kernels.size(); ++i) {
    const KernelCost& k = c.kernels[i];
    out += fmt::format("    {{\"name\": {}, \"kind\": {}, \"flops\": {}, \"bytes\": {}, \"gemm\": [{}, {}, {}, {}], "
                       "\"cpu_us\": {}, \"cpu_compute_us\": {}, \"cpu_memory_us\": {}, \"cpu_threads\": {}, "
                       "\"cpu_bound\": \"{}\"",
                       rt::json::quote(k.name), rt::json::quote(ir::kernelKindName(k.kind)), num(k.flops), k.bytes,
                       k.batch, k.m, k.n, k.k, num(k.cpu.micros), num(k.cpu.computeMicros), num(k.cpu.memoryMicros),
                       k.cpu.threads, boundName(k.cpu.bound));
    if (k.gpu)
      out += fmt::format(", \"gpu_us\": {}, \"gpu_launches\": {}, \"gpu_bound\": \"{}\"", num(k.gpu->micros),
                         k.gpu->launches, boundName(k.gpu->bound));
    if (r.measured) out += fmt::format(", \"measured_us\": {}", num(r.measured->kernelMicros[i]));
    out += i + 1 < c.kernels.size() ? "},\n" : "}\n";
  }
  return out + "  ]\n}\n";
}

}  // namespace kiln::cost
