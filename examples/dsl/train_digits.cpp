// Trains a small MLP on scikit-learn's digits (8x8 images of handwritten digits) with the kiln DSL
// and the LLVM CPU backend. The model and its loss are declared once; kiln::build turns them
// into a whole training step (forward, loss, backward, Adam, fresh dropout masks every step) and
// the matching inference graph, which here is rebuilt for the whole test split as one batch.
//
//   train_digits [EPOCHS]      prints the loss and training accuracy per epoch, then the test
//                              accuracy (default 12 epochs, a few seconds)
#include "frontend/Kiln.h"
#include "engine/Executor.h"
#include "interp/Interpreter.h"
#include "runtime/Datasets.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

using namespace kiln;

// 64 pixels → 64 hidden units → 10 classes, with dropout while training.
struct DigitsNet : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = registerModule("fc1", std::make_shared<nn::Linear>(64, 64));
  std::shared_ptr<nn::Dropout> drop = registerModule("drop", std::make_shared<nn::Dropout>(0.1));
  std::shared_ptr<nn::Linear> fc2 = registerModule("fc2", std::make_shared<nn::Linear>(64, 10));
  Tensor forward(const Tensor& x) { return (*fc2)((*drop)(relu((*fc1)(x)))); }
};

constexpr int64_t kBatch = 32;

/// The examples rows[first], …, rows[first + count - 1] of `t` (any dtype, examples first).
rt::HostTensor gatherRows(const rt::HostTensor& t, const std::vector<int64_t>& rows, size_t first, size_t count) {
  std::vector<int64_t> shape = t.shape();
  shape[0] = static_cast<int64_t>(count);
  rt::HostTensor out(t.dtype(), shape);
  size_t rowBytes = t.bytes() / static_cast<size_t>(t.shape()[0]);
  for (size_t i = 0; i < count; ++i)
    std::memcpy(static_cast<std::byte*>(out.data()) + i * rowBytes,
                static_cast<const std::byte*>(t.data()) + rows[first + i] * rowBytes, rowBytes);
  return out;
}

/// A Fisher-Yates shuffle drawing raw mt19937_64 numbers, so the order is the same everywhere.
void shuffle(std::vector<int64_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size() - 1; i > 0; --i) std::swap(v[i], v[rng() % (i + 1)]);
}

int main(int argc, char** argv) {
  try {
    int epochs = argc > 1 ? std::atoi(argv[1]) : 12;
    rt::TabularDataset digits = rt::loadDigits();
    for (int64_t i = 0; i < digits.features.numel(); ++i) digits.features.set(i, digits.features.at(i) / 16.0);
    // The file is ordered by writer: hold out a fixed pseudo-random fifth for testing.
    std::mt19937_64 rng(2024);
    std::vector<int64_t> order(static_cast<size_t>(digits.size()));
    std::iota(order.begin(), order.end(), 0);
    shuffle(order, rng);
    size_t numTest = order.size() / 5;
    std::vector<int64_t> test(order.begin(), order.begin() + numTest), train(order.begin() + numTest, order.end());

    // The model, declared once: inputs and targets with their batch size, forward, loss, metrics.
    auto net = std::make_shared<DigitsNet>();
    Model spec;
    spec.name = "digits_mlp";
    spec.seed = 1;
    spec.module = net.get();  // build() traces training in train mode and inference in eval mode
    spec.inputs = {{"x", DType::f32, {kBatch, 64}}};
    spec.targets = {{"labels", DType::i64, {kBatch}}};
    spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"logits", net->forward(in["x"])}}; };
    spec.loss = [](const NamedTensors& out, const NamedTensors& t) {
      return cross_entropy(out["logits"], t["labels"]);
    };
    spec.metrics = [](const NamedTensors& out, const NamedTensors& t) -> NamedTensors {
      return {{"accuracy", mean(cast(argmax(out["logits"], 1) == t["labels"], DType::f32))}};
    };
    OptimizerConfig adam;
    adam.kind = OptimizerConfig::Kind::Adam;
    BuiltModel model = build(spec, adam);
    for (const std::string& w : model.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

    // The training step compiled for the CPU (the default target; {.target = engine::Target::Interp}
    // runs the reference interpreter). The executor owns the parameters, Adam's moments and the
    // dropout counter: the state every step reads and updates.
    std::unique_ptr<engine::Executor> step = engine::Executor::create(model.trainStep);
    rt::HostTensor lr(DType::f32, {});
    lr.set(0, 0.01);
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      shuffle(train, rng);
      double loss = 0, accuracy = 0;
      size_t steps = train.size() / kBatch;  // the last partial batch is dropped
      for (size_t s = 0; s < steps; ++s) {
        interp::TensorMap batch = {{"x", gatherRows(digits.features, train, s * kBatch, kBatch)},
                                   {"labels", gatherRows(digits.labels, train, s * kBatch, kBatch)},
                                   {"lr", lr}};
        interp::TensorMap out = step->run(batch);
        loss += out.at("loss").at(0);
        accuracy += out.at("accuracy").at(0);
      }
      std::printf("epoch %d: loss %.4f, training accuracy %.1f%%\n", epoch, loss / steps, 100 * accuracy / steps);
    }

    // The inference graph for the whole test split at once, on the trained parameters.
    std::unique_ptr<engine::Executor> inference =
        engine::Executor::create(model.inferenceForBatch(static_cast<int64_t>(test.size())));
    inference->setParams(step->params());  // the parameters it shares with the step, by name
    rt::HostTensor logits = inference->run({{"x", gatherRows(digits.features, test, 0, test.size())}}).at("logits");
    int64_t correct = 0;
    for (size_t i = 0; i < test.size(); ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < 10; ++c)
        if (logits.at(static_cast<int64_t>(i) * 10 + c) > logits.at(static_cast<int64_t>(i) * 10 + best)) best = c;
      correct += best == static_cast<int64_t>(digits.labels.at(test[i]));
    }
    std::printf("test accuracy %.2f%% (%lld of %zu held-out digits)\n", 100.0 * correct / test.size(),
                static_cast<long long>(correct), test.size());
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
