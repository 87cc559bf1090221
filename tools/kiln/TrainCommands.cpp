// `kiln train`: trains a zoo classifier on a real data set with the whole training step (forward,
// backward, optimizer) as one graph, run by the LLVM CPU backend (or the reference interpreter with
// --target interp).
#include "tools/kiln/Commands.h"
#include "tools/kiln/Plot.h"
#include "tools/kiln/Profile.h"

#include "engine/Executor.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "interp/Interpreter.h"
#include "ir/Printer.h"
#include "runtime/Datasets.h"
#include "runtime/Safetensors.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>

#include <unistd.h>

namespace kiln::cli {

namespace {

/// Ctrl-C during training: the first stops after the current step (then the epoch's figures, the
/// weights and the loss curve are still written); a second one ends the process at once.
std::atomic<bool> gInterrupted{false};

extern "C" void onInterrupt(int) {
  gInterrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

/// A one-line progress bar on a terminal (stderr), redrawn at most every 100 ms.
class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t steps) : epoch_(epoch), epochs_(epochs), steps_(steps) {
    enabled_ = ::isatty(STDERR_FILENO);
  }
  void update(int64_t step, double meanLoss) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (step < steps_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double seconds = std::chrono::duration<double>(now - start_).count();
    double rate = step / std::max(seconds, 1e-9), eta = (steps_ - step) / std::max(rate, 1e-9);
    int filled = static_cast<int>(30 * step / std::max<int64_t>(steps_, 1));
    std::fprintf(stderr, "\r  epoch %lld/%lld [%s%s] %3d%%  %.0f steps/s  loss %.4f  ETA %.0fs   ",
                 static_cast<long long>(epoch_), static_cast<long long>(epochs_), std::string(filled, '#').c_str(),
                 std::string(30 - filled, '.').c_str(), static_cast<int>(100 * step / std::max<int64_t>(steps_, 1)),
                 rate, meanLoss, eta);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) std::fprintf(stderr, "\r%*s\r", 100, "");
  }

 private:
  int64_t epoch_, epochs_, steps_;
  bool enabled_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

/// The loss curve: the mean loss of every `every` steps against the step number.
void writeLossCurve(const std::string& path, const std::string& model, const std::vector<double>& losses) {
  Chart chart;
  chart.title = fmt::format("kiln train {}: training loss", model);
  chart.xLabel = "step";
  chart.yLabel = "loss (mean over the points' steps)";
  Series s{.name = "loss", .color = "", .points = {}};
  const size_t every = std::max<size_t>(1, losses.size() / 400);
  for (size_t i = 0; i + every <= losses.size(); i += every) {
    double sum = 0;
    for (size_t j = i; j < i + every; ++j) sum += losses[j];
    s.points.emplace_back(static_cast<double>(i + every), sum / static_cast<double>(every));
  }
  chart.series.push_back(std::move(s));
  writeTextOutput(path, chartSvg(chart));
  std::fprintf(stderr, "wrote %s\n", path.c_str());
}

struct Split {
  rt::HostTensor x;  // [N, ...] f32
  rt::HostTensor y;  // [N] i64
  int64_t size() const { return y.numel(); }
};

/// Rows `rows` of `t` gathered into a new [rows.size(), ...] tensor whose trailing shape is `rowShape`.
rt::HostTensor gatherRows(const rt::HostTensor& t, std::span<const int64_t> rows, const ir::Shape& rowShape) {
  std::vector<int64_t> shape = {static_cast<int64_t>(rows.size())};
  shape.insert(shape.end(), rowShape.begin(), rowShape.end());
  rt::HostTensor out(t.dtype(), shape);
  size_t rowBytes = t.bytes() / static_cast<size_t>(t.shape()[0]);
  KILN_CHECK(rowBytes == out.bytes() / rows.size(), "a data set example has {} bytes, the model expects {}", rowBytes,
             out.bytes() / rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<std::byte*>(out.data()) + i * rowBytes,
                static_cast<const std::byte*>(t.data()) + rows[i] * rowBytes, rowBytes);
  return out;
}

/// Fisher-Yates with a SplitMix64 stream: the same order for the same seed on every machine.
void shuffle(std::vector<int64_t>& v, uint64_t& state) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    std::swap(v[i], v[(z ^ (z >> 31)) % static_cast<uint64_t>(i + 1)]);
  }
}

/// Train and test splits of a data set, features scaled to [0, 1].
std::pair<Split, Split> loadData(const std::string& name, int64_t limit) {
  if (name == "fashion-mnist") {
    rt::ImageDataset train = rt::loadFashionMnist(rt::Split::Train, rt::defaultFashionMnistDir(), limit);
    rt::ImageDataset test = rt::loadFashionMnist(rt::Split::Test);
    return {{std::move(train.images), std::move(train.labels)}, {std::move(test.images), std::move(test.labels)}};
  }
  // digits: 1797 8x8 images with pixel values 0..16. The data set is ordered by writer, so the
  // test split is a fixed pseudo-random fifth (as scikit-learn's train_test_split shuffles).
  rt::TabularDataset d = rt::loadDigits();
  for (int64_t i = 0; i < d.features.numel(); ++i) d.features.set(i, d.features.at(i) / 16.0);
  int64_t n = d.size(), nTest = n / 5;
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  uint64_t splitSeed = 1234;
  shuffle(all, splitSeed);
  std::vector<int64_t> testRows(all.begin(), all.begin() + nTest), trainRows(all.begin() + nTest, all.end());
  if (limit > 0 && limit < static_cast<int64_t>(trainRows.size())) trainRows.resize(static_cast<size_t>(limit));
  ir::Shape row = {d.features.shape()[1]};
  return {{gatherRows(d.features, trainRows, row), gatherRows(d.labels, trainRows, {})},
          {gatherRows(d.features, testRows, row), gatherRows(d.labels, testRows, {})}};
}

/// Accuracy over every example of `data`, in batches of `batch` and one smaller last batch; the
/// inference graphs (eval mode, one executor per batch size, compiled on first use) get the
/// model's trained parameters (not the optimizer state). `row` is the shape of one example.
double accuracy(const BuiltModel& model, int64_t batch, const Split& data, const ir::Shape& row,
                const interp::TensorMap& trained, std::map<int64_t, std::unique_ptr<engine::Executor>>& executors,
                engine::Target target) {
  int64_t correct = 0;
  for (int64_t start = 0; start < data.size();) {
    int64_t n = std::min(batch, data.size() - start);
    std::unique_ptr<engine::Executor>& exec = executors[n];
    if (!exec) exec = engine::Executor::create(model.inferenceForBatch(n), executorOptions(target, "", false));
    exec->setParams(trained);
    std::vector<int64_t> rows(n);
    std::iota(rows.begin(), rows.end(), start);
    rt::HostTensor logits = exec->run({{"x", gatherRows(data.x, rows, row)}}).at("logits");
    int64_t classes = logits.shape()[1];
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < classes; ++j)
        if (logits.at(i * classes + j) > logits.at(i * classes + best)) best = j;
      correct += best == static_cast<int64_t>(data.y.at(start + i));
    }
    start += n;
  }
  return data.size() ? static_cast<double>(correct) / data.size() : 0.0;
}

}  // namespace

void addTrainCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  struct Options {
    std::string model, data, optimizer = "adam", save, target = "cpu", precision = "f32", dumpDir,
        lossCurve;
    int64_t epochs = 1, batch = 32, limit = -1, evalLimit = -1, evalBatch = 500;
    double lr = 1e-3, momentum = 0, weightDecay = 0, clipNorm = 0;
    uint64_t seed = 0;
    bool profile = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("train", "Train a zoo classifier on a data set (one graph per training step)");
  cmd->add_option("MODEL", o->model, "zoo model: mnist_mlp, cnn (fashion-mnist) or digits_mlp (digits)")->required();
  cmd->add_option("--data", o->data, "fashion-mnist or digits (default: the one whose examples fit the model)")->check(CLI::IsMember({"fashion-mnist", "digits"}));
  cmd->add_option("--epochs", o->epochs, "passes over the training set")->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--batch", o->batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  cmd->add_option("--limit", o->limit, "use only the first N training examples")->check(CLI::PositiveNumber);
  cmd->add_option("--eval-limit", o->evalLimit, "measure test accuracy on the first N test examples only")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", o->optimizer, "sgd, adam or adamw")->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", o->lr, "learning rate")->check(FinitePositive);
  cmd->add_option("--momentum", o->momentum, "SGD momentum")->check(FiniteNonNegative);
  cmd->add_option("--weight-decay", o->weightDecay, "weight decay")->check(FiniteNonNegative);
  cmd->add_option("--clip-norm", o->clipNorm, "clip gradients to this global L2 norm (0: off)")
      ->check(FiniteNonNegative);
  cmd->add_option("--precision", o->precision,
                  "f32, bf16 or f16: contractions in low precision (amp pass); f16 adds dynamic loss scaling")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--seed", o->seed, "seed of the initializers and the shuffling");
  cmd->add_option("--save", o->save, "write the trained parameters to this safetensors file");
  cmd->add_option("--loss-curve", o->lossCurve, "write the training loss against the step as an SVG chart");
  cmd->add_flag("--profile", o->profile, "after training, print each kernel's time per step, share, GFLOP/s, GB/s and source lines");
  cmd->add_option("--target", o->target, "where to run: cpu (the LLVM CPU backend), cuda (the CUDA backend, on GPU 0), interp (the reference interpreter) or auto (the device the cost model predicts faster, checked against the first steps)")
      ->check(CLI::IsMember({"cpu", "cuda", "interp", "auto"}));
  addDumpOption(cmd, o->dumpDir);
  commands.emplace_back(cmd, [o] {
    const engine::Target target = engine::parseTarget(o->target);
    // Outputs first: a typo in a path should not cost a training run.
    checkOutputPath(o->save, "--save");
    checkOutputPath(o->lossCurve, "--loss-curve");
    passes::TrainingStepOptions to;
    to.optimizer.kind = passes::optimizerKindFromName(o->optimizer);
    to.optimizer.momentum = o->momentum;
    to.optimizer.weightDecay = o->weightDecay;
    to.optimizer.clipNorm = o->clipNorm;
    to.precision = passes::precisionFromName(o->precision);
    BuiltModel model = build(zooModel(o->model, {.batch = o->batch, .seed = o->seed}), to);
    const ir::Graph& step = model.trainStep;
    KILN_CHECK(step.findOutput("logits") != nullptr && step.findInput("labels") != nullptr,
               "kiln train needs a classifier (outputs logits, input labels); '{}' is not one", o->model);
    const ir::Value* x = step.findInput("x");
    KILN_CHECK(x != nullptr, "model '{}' has no input 'x'", o->model);
    ir::Shape row(x->type.shape.begin() + 1, x->type.shape.end());
    int64_t modelValues = 1;
    for (int64_t d : row) modelValues *= d;
    for (const std::string& w : model.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    // The training step's precision is already applied; amp at f32 leaves it alone.
    const std::string dumpDir = dumpDirectory(o->dumpDir);
    if (!dumpDir.empty() && target == engine::Target::Interp) dumpCompilation(step, dumpDir, "f32");
    // The data set whose examples fit the model: digits' 64 values, else Fashion-MNIST's images.
    if (o->data.empty()) o->data = modelValues == 64 ? "digits" : "fashion-mnist";
    auto [train, test] = loadData(o->data, o->limit);
    const int64_t rowValues = train.x.numel() / std::max<int64_t>(train.size(), 1);
    KILN_CHECK(rowValues == modelValues,
               "the data set '{}' has examples of {} values ({}); model '{}' takes x of shape {} ({} values): {}",
               o->data, rowValues, train.x.typeStr(), o->model, ir::shapeStr(row), modelValues,
               "train it on the other data set (--data)");
    KILN_CHECK(train.size() >= o->batch,
               "the batch ({}) is larger than the {} training examples of '{}'{}: no step would run", o->batch,
               train.size(), o->data, o->limit > 0 ? fmt::format(" (--limit {})", o->limit) : "");
    if (o->evalLimit > 0 && o->evalLimit < test.size()) {
      std::vector<int64_t> rows(o->evalLimit);
      std::iota(rows.begin(), rows.end(), 0);
      ir::Shape xRow(test.x.shape().begin() + 1, test.x.shape().end());
      test = {gatherRows(test.x, rows, xRow), gatherRows(test.y, rows, {})};
    }
    std::unique_ptr<engine::Executor> exec = engine::Executor::create(step, executorOptions(target, dumpDir, o->profile));
    std::map<int64_t, std::unique_ptr<engine::Executor>> evaluators;
    std::printf("training %s on %s: %lld examples, batch %lld, %s lr %g, %zu parameter tensors, target %s%s\n",
                o->model.c_str(), o->data.c_str(), static_cast<long long>(train.size()),
                static_cast<long long>(o->batch), o->optimizer.c_str(), o->lr, step.params().size(),
                engine::targetName(exec->target()),
                exec->target() != engine::Target::Interp ? fmt::format(" (compiled in {:.0f} ms)", exec->compileMs()).c_str() : "");

    std::vector<int64_t> order(train.size());
    std::iota(order.begin(), order.end(), 0);
    rt::HostTensor lr(DType::f32, {});
    lr.set(0, o->lr);
    uint64_t shuffleState = o->seed * 0x9E3779B97F4A7C15ull + 1;
    std::vector<double> losses;
    gInterrupted.store(false);
    auto previous = std::signal(SIGINT, onInterrupt);
    interp::TensorMap out;  // kept across steps: the step writes into it
    for (int64_t epoch = 1; epoch <= o->epochs && !gInterrupted.load(); ++epoch) {
      shuffle(order, shuffleState);
      auto t0 = std::chrono::steady_clock::now();
      double lossSum = 0;
      int64_t steps = 0, skipped = 0;
      Progress progress(epoch, o->epochs, train.size() / o->batch);
      for (int64_t start = 0; start + o->batch <= train.size() && !gInterrupted.load(); start += o->batch, ++steps) {
        std::span<const int64_t> rows(order.data() + start, o->batch);
        interp::TensorMap in{{"x", gatherRows(train.x, rows, row)}, {"labels", gatherRows(train.y, rows, {})},
                             {"lr", lr}};
        exec->run(in, out);
        double loss = out.at("loss").at(0);
        if (out.count("amp.skipped") && out.at("amp.skipped").at(0) != 0) {
          ++skipped;  // f16 overflow: the step kept the parameters and halved the loss scale
          continue;
        }
        KILN_CHECK(std::isfinite(loss), "the loss became {} at epoch {}, step {}: lower the learning rate", loss,
                   epoch, steps + 1);
        lossSum += loss;
        losses.push_back(loss);
        progress.update(steps + 1, lossSum / static_cast<double>(steps + 1 - skipped));
      }
      progress.clear();
      if (gInterrupted.load())
        std::printf("interrupted: stopped after step %lld of epoch %lld\n", static_cast<long long>(steps),
                    static_cast<long long>(epoch));
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double acc = accuracy(model, o->evalBatch, test, row, exec->params(), evaluators, exec->target());
      std::printf("epoch %lld: loss %.4f, test accuracy %.2f%%, %.0f samples/s (%lld steps in %.1f s)%s\n",
                  static_cast<long long>(epoch), steps > skipped ? lossSum / (steps - skipped) : 0.0, 100 * acc,
                  steps * o->batch / seconds, static_cast<long long>(steps), seconds,
                  skipped ? fmt::format(", {} skipped on f16 overflow", skipped).c_str() : "");
      std::fflush(stdout);
    }
    std::signal(SIGINT, previous);
    if (o->profile) {
      std::printf("profile of the training step (mean per step):\n");
      std::fputs(profileTable(step, passes::Precision::F32, exec->kernelProfile()).c_str(), stdout);
    }
    if (!o->save.empty()) {  // the weights before the chart: they are what a run is for
      interp::TensorMap params = exec->params();
      rt::NamedTensors weights;
      for (const std::string& name : model.parameterNames) weights.emplace(name, params.at(name));
      rt::saveSafetensors(o->save, weights);
      std::fprintf(stderr, "wrote %s\n", o->save.c_str());
    }
    if (!o->lossCurve.empty()) writeLossCurve(o->lossCurve, o->model, losses);
    return 0;
  });
}

}  // namespace kiln::cli
