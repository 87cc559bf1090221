// `kiln bench`: a model's step time on each device across batch sizes, measured and predicted (the
// cost model, cost/CostModel.h), the crossover batch size where the GPU starts to win, and an SVG
// plot of throughput against batch size.
#include "tools/kiln/Commands.h"
#include "tools/kiln/Plot.h"
#include "tools/kiln/Profile.h"

#include "cost/CostModel.h"
#include "cost/MachineProfile.h"
#include "engine/Executor.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/Philox.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model, batches = "1,8,64,512,4096", targets = "cpu,cuda", precision = "f32", optimizer = "adam",
                     plot, gpuProfile, json;
  bool train = false, profile = false;
  double seconds = 0.3;
  uint64_t seed = 0;
};

/// One measured point: a target at a batch size.
struct Point {
  std::string target;
  int64_t batch = 0;
  double ms = 0;           // median step time
  int runs = 0;
  double compileMs = 0;
  double flops = 0;        // per step
  double predictedMs = 0;  // the cost model's step time on this target (0: no prediction)
  double peakGflops = 0;   // the device's measured peak for the precision (0: unknown)
};

std::vector<int64_t> parseBatches(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    char* end = nullptr;
    long long b = std::strtoll(item.c_str(), &end, 10);
    KILN_CHECK(end && *end == '\0' && b >= 1 && b <= (1 << 20), "--batch: '{}' is not a batch size (1..1048576)",
               item);
    out.push_back(b);
  }
  KILN_CHECK(!out.empty(), "--batch: no batch size given");
  return out;
}

std::vector<std::string> parseTargets(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    engine::parseTarget(item);  // names the valid ones on error
    KILN_CHECK(item != "interp", "--target interp: the interpreter is the oracle, not a device to benchmark");
    out.push_back(item);
  }
  KILN_CHECK(!out.empty(), "--target: no target given");
  return out;
}

/// The graph to benchmark at `batch`: a zoo model's inference or training step, or a .kir file.
ir::Graph graphFor(const Options& o, int64_t batch) {
  if (namesKirFile(o.model)) return ir::parseGraphFile(o.model);
  Model spec = zooModel(o.model, {.batch = batch, .seed = o.seed});
  if (!o.train) return buildInference(spec, batch);
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::optimizerKindFromName(o.optimizer);
  to.precision = passes::precisionFromName(o.precision);
  return buildTrainStep(spec, to, batch);
}

/// Median milliseconds of `exec` on `in` after two warm-up runs: at least 3 runs and `seconds`.
std::pair<double, int> timeSteps(engine::Executor& exec, const interp::TensorMap& in, double seconds) {
  interp::TensorMap out;  // kept: the runs write into it (no allocation per run)
  for (int i = 0; i < 2; ++i) exec.run(in, out);
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         (std::chrono::duration<double>(Clock::now() - start).count() < seconds && times.size() < 100000)) {
    const auto t0 = Clock::now();
    exec.run(in, out);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], static_cast<int>(times.size())};
}

double peakFor(const std::string& target, const cost::MachineProfile& mp, const cost::GpuProfile* gpu,
               const std::string& precision) {
  if (target == "cpu") {
    const int t = rt::ThreadPool::global().threads();
    if (precision == "bf16" && mp.cpu.peakBf16(t) > 0) return mp.cpu.peakBf16(t);
    return mp.cpu.peakGflops.empty() ? 0 : mp.cpu.peak(t);
  }
  if (!gpu) return 0;
  return precision == "bf16" ? gpu->peakBf16 : precision == "f16" ? gpu->peakF16 : gpu->peakF32;
}

std::string fmtMs(double ms) {
  if (ms <= 0) return "-";
  return ms < 0.01 ? fmt::format("{:.4f}", ms) : ms < 1 ? fmt::format("{:.3f}", ms) : fmt::format("{:.1f}", ms);
}

/// The step time of `target` at `batch` (measured, or predicted), 0 when there is none.
double timeOf(const std::vector<Point>& points, const std::string& target, int64_t batch, bool predicted) {
  for (const Point& p : points)
    if (p.target == target && p.batch == batch) return predicted ? p.predictedMs : p.ms;
  return 0;
}

/// The smallest batch size from which `b` beats `a` in samples/s at every larger batch size (by
/// the measurements or the predictions), or nullopt.
std::optional<int64_t> crossover(const std::vector<Point>& points, const std::vector<int64_t>& batches,
                                 const std::string& a, const std::string& b, bool predicted) {
  std::optional<int64_t> found;
  for (int64_t batch : batches) {
    const double ta = timeOf(points, a, batch, predicted), tb = timeOf(points, b, batch, predicted);
    if (ta <= 0 || tb <= 0) continue;
    if (tb >= ta) found.reset();
    else if (!found) found = batch;
  }
  return found;
}

}  // namespace

void addBenchCommand(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("bench", "Time a model on each device across batch sizes, measured and predicted");
  cmd->add_option("MODEL", o->model, "zoo model (see `kiln models`) or a .kir file")->required();
  CLI::Option* batchOpt = cmd->add_option("--batch", o->batches,
                                          "comma-separated batch sizes (default 1,8,64,512,4096; a .kir file's own)");
  cmd->add_flag("--train", o->train, "the whole training step instead of inference");
  cmd->add_option("--optimizer", o->optimizer, "with --train: sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--precision", o->precision, "f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--target", o->targets, "comma-separated targets: cpu, cuda (default cpu,cuda)");
  cmd->add_option("--seconds", o->seconds, "time each point for this long (default 0.3)")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_option("--seed", o->seed, "seed of a zoo model's parameter initializers");
  cmd->add_option("--plot", o->plot, "write samples/s against batch size as an SVG chart");
  cmd->add_option("--gpu-profile", o->gpuProfile,
                  "predict the GPU from this profile (machine.json of a GPU machine) when this one has none");
  cmd->add_option("--json", o->json, "also write every point as JSON lines to this file");
  cmd->add_flag("--profile", o->profile, "print each point's kernels: time, share, GFLOP/s, GB/s, source lines");
  commands.emplace_back(cmd, [o, batchOpt] {
    checkOutputPath(o->json, "--json");
    checkOutputPath(o->plot, "--plot");
    std::vector<int64_t> batches = parseBatches(o->batches);
    std::vector<std::string> targets = parseTargets(o->targets);
    const bool kir = namesKirFile(o->model);
    KILN_CHECK(!(kir && o->train), "--train applies to zoo models; export a training step with `kiln export --train`");
    if (kir) {
      // A .kir file runs at its own shapes: its batch is its first input's leading dimension.
      const ir::Graph g = ir::parseGraphFile(o->model);
      KILN_CHECK(!g.inputs().empty(), "{}: the graph has no input to take a batch size from", o->model);
      const ir::Value* first = g.inputs().front();
      const int64_t own = first->type.shape.empty() ? 1 : first->type.shape.front();
      KILN_CHECK(batchOpt->count() == 0 || batches == std::vector<int64_t>{own},
                 "{} runs at its own batch, {} (its first input %{} : {}); --batch {} does not match it", o->model,
                 own, first->name, first->type.str(), o->batches);
      batches = {own};
    }

    cost::ProfileOptions po;
    po.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    const cost::MachineProfile mp = cost::machineProfile(po);
    std::optional<cost::GpuProfile> fileGpu;
    if (!o->gpuProfile.empty()) fileGpu = cost::gpuProfileFromFile(o->gpuProfile);
    const cost::GpuProfile* gpu = !mp.gpus.empty() ? &mp.gpus.front() : fileGpu ? &*fileGpu : nullptr;

    const passes::Precision precision = passes::precisionFromName(o->precision);
    std::vector<Point> points;
    std::vector<std::string> skipped;
    const std::string what = fmt::format("{}{}{}", o->model, o->train ? ", training step" : ", inference",
                                         o->precision == "f32" ? "" : ", " + o->precision);
    std::printf("kiln bench %s — %s\n", what.c_str(), mp.cpu.identity.model.c_str());
    for (int64_t batch : batches) {
      const ir::Graph g = graphFor(*o, batch);
      // A training step carries its precision already; amp at f32 leaves it alone.
      const passes::Precision pipelinePrecision = o->train ? passes::Precision::F32 : precision;
      const ir::Graph compiled = passes::compiledCopy(g, pipelinePrecision);
      const cost::ProgramCost predicted = cost::predictProgram(compiled, mp.cpu, gpu);
      const interp::TensorMap in = interp::sampleInputs(g);
      for (const std::string& target : targets) {
        Point p{.target = target, .batch = batch};
        p.flops = predicted.flops;
        p.peakGflops = peakFor(target, mp, gpu, o->precision);
        p.predictedMs = target == "cpu" ? predicted.cpuStepMicros / 1e3 : predicted.hasGpu ? predicted.gpuStepMicros / 1e3 : 0;
        try {
          engine::ExecutorOptions eo;
          eo.target = engine::parseTarget(target);
          eo.precision = pipelinePrecision;
          // A profiled CUDA program launches kernel by kernel between events (no graph replay):
          // its per-kernel table comes from a second, profiled program, the timed one stays as users run it.
          eo.profile = o->profile && target == "cpu";
          std::unique_ptr<engine::Executor> exec = engine::Executor::create(g, eo);
          p.compileMs = exec->compileMs();
          std::tie(p.ms, p.runs) = timeSteps(*exec, in, o->seconds);
          if (o->profile && !eo.profile) {
            eo.profile = true;
            exec = engine::Executor::create(g, eo);
            timeSteps(*exec, in, std::min(o->seconds, 0.3));
          }
          if (o->profile)
            std::printf("\nbatch %lld on %s, per kernel:\n%s", static_cast<long long>(batch), target.c_str(),
                        profileTable(g, pipelinePrecision, exec->kernelProfile()).c_str());
        } catch (const Error& e) {
          if (target == "cpu") throw;
          // No device (or it does not fit): keep the prediction, say why once.
          std::string why = fmt::format("{}: not measured ({})", target, e.what());
          if (std::find(skipped.begin(), skipped.end(), why) == skipped.end()) skipped.push_back(why);
        }
        points.push_back(p);
      }
    }
    for (const std::string& s : skipped) std::printf("%s\n", s.c_str());

    std::printf("\n%7s  %-6s %11s %12s %10s %7s %13s %7s\n", "batch", "target", "ms/step", "samples/s", "GFLOP/s",
                "% peak", "predicted ms", "error");
    for (const Point& p : points) {
      const bool measured = p.ms > 0;
      if (!measured && p.predictedMs <= 0) continue;  // a target without a device or a profile
      const double gflops = measured ? p.flops / (p.ms * 1e6) : 0;
      std::printf("%7lld  %-6s %11s %12s %10s %7s %13s %7s\n", static_cast<long long>(p.batch), p.target.c_str(),
                  measured ? fmtMs(p.ms).c_str() : "-",
                  measured ? fmt::format("{:.0f}", p.batch / (p.ms / 1e3)).c_str() : "-",
                  measured ? fmt::format("{:.2f}", gflops).c_str() : "-",
                  measured && p.peakGflops > 0 ? fmt::format("{:.0f} %", 100 * gflops / p.peakGflops).c_str() : "-",
                  fmtMs(p.predictedMs).c_str(),
                  measured && p.predictedMs > 0 ? fmt::format("{:+.0f} %", 100 * (p.predictedMs - p.ms) / p.ms).c_str()
                                                : "-");
    }
    std::optional<int64_t> cross;
    bool crossPredicted = false;
    if (std::find(targets.begin(), targets.end(), "cuda") != targets.end() &&
        std::find(targets.begin(), targets.end(), "cpu") != targets.end()) {
      std::vector<int64_t> sorted = batches;
      std::sort(sorted.begin(), sorted.end());
      const bool cudaMeasured =
          std::any_of(points.begin(), points.end(), [](const Point& p) { return p.target == "cuda" && p.ms > 0; });
      crossPredicted = !cudaMeasured;
      if (!cudaMeasured && !gpu) {
        std::printf("\nno GPU here and no --gpu-profile: the CPU side only\n");
      } else {
        cross = crossover(points, sorted, "cpu", "cuda", crossPredicted);
        const char* how = crossPredicted ? " (predicted)" : "";
        if (cross)
          std::printf("\ncrossover: the GPU (%s) wins from batch %lld on%s\n", gpu ? gpu->name.c_str() : "cuda",
                      static_cast<long long>(*cross), how);
        else {
          const int64_t last = sorted.back();
          const bool gpuAhead = timeOf(points, "cuda", last, crossPredicted) > 0 &&
                                timeOf(points, "cuda", last, crossPredicted) < timeOf(points, "cpu", last, crossPredicted);
          std::printf("\nno crossover in these batch sizes%s: %s\n", how,
                      gpuAhead ? "the GPU is ahead at the largest but not throughout" : "the CPU wins at every one");
        }
      }
    }
    if (!o->json.empty()) {
      std::string lines;
      for (const Point& p : points)
        lines += fmt::format("{{\"model\": \"{}\", \"train\": {}, \"precision\": \"{}\", \"target\": \"{}\", \"batch\": {}, "
                             "\"ms\": {:.6g}, \"runs\": {}, \"compile_ms\": {:.4g}, \"flops\": {:.6g}, \"predicted_ms\": {:.6g}}}\n",
                             o->model, o->train, o->precision, p.target, p.batch, p.ms, p.runs, p.compileMs, p.flops,
                             p.predictedMs);
      writeTextOutput(o->json, lines);
    }
    if (!o->plot.empty()) {
      Chart chart;
      chart.title = fmt::format("kiln bench {}: throughput by batch size", what);
      chart.xLabel = "batch size";
      chart.yLabel = "samples per second";
      chart.logX = chart.logY = true;
      for (const std::string& target : targets) {
        Series measured{.name = target + " measured", .color = target == "cpu" ? "#1f77b4" : "#2ca02c", .points = {}};
        Series predicted{.name = target == "cuda" && gpu ? fmt::format("cuda predicted: {}", gpu->name) : target + " predicted",
                         .color = target == "cpu" ? "#9ecae1" : "#a1d99b", .points = {}};
        for (const Point& p : points) {
          if (p.target != target) continue;
          if (p.ms > 0) measured.points.emplace_back(static_cast<double>(p.batch), p.batch / (p.ms / 1e3));
          if (p.predictedMs > 0) predicted.points.emplace_back(static_cast<double>(p.batch), p.batch / (p.predictedMs / 1e3));
        }
        if (!measured.points.empty()) chart.series.push_back(std::move(measured));
        if (!predicted.points.empty()) chart.series.push_back(std::move(predicted));
      }
      if (cross) {
        chart.markerX = static_cast<double>(*cross);
        chart.markerLabel = fmt::format("crossover: batch {}{}", *cross, crossPredicted ? " (predicted)" : "");
      }
      writeTextOutput(o->plot, chartSvg(chart));
      std::fprintf(stderr, "wrote %s\n", o->plot.c_str());
    }
    return 0;
  });
}

}  // namespace kiln::cli
