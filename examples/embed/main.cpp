// kiln from a user's own C++ project (examples/embed/CMakeLists.txt: find_package(kiln)): define a
// model with the DSL, train it with the LLVM CPU backend, export it ahead of time to a C library,
// and check that the library predicts exactly what the trained model predicts.
//
//   embed [OUT_DIR]     (the library goes to OUT_DIR, default ./embed-aot)
//
// The task: points in the plane, labelled by which of two interleaved spirals they lie on.
#include "aot/Export.h"
#include "aot/Library.h"
#include "engine/Executor.h"
#include "frontend/Kiln.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

using namespace kiln;

struct SpiralNet : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = registerModule("fc1", std::make_shared<nn::Linear>(2, 64));
  std::shared_ptr<nn::Linear> fc2 = registerModule("fc2", std::make_shared<nn::Linear>(64, 64));
  std::shared_ptr<nn::Linear> fc3 = registerModule("fc3", std::make_shared<nn::Linear>(64, 2));
  Tensor forward(const Tensor& x) { return (*fc3)(tanh((*fc2)(tanh((*fc1)(x))))); }
};

constexpr int64_t kBatch = 64, kTest = 512;

/// `n` points of two spirals with a little noise: x [n, 2] f32, labels [n] i64.
std::pair<rt::HostTensor, rt::HostTensor> spirals(int64_t n, std::mt19937_64& rng) {
  rt::HostTensor x(DType::f32, {n, 2}), y(DType::i64, {n});
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 0.04);
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = i % 2;
    double t = 0.25 + 2.75 * u(rng), angle = 3.0 * t + M_PI * static_cast<double>(label);
    x.set(2 * i, t / 3 * std::cos(angle) + noise(rng));
    x.set(2 * i + 1, t / 3 * std::sin(angle) + noise(rng));
    y.set(i, static_cast<double>(label));
  }
  return {std::move(x), std::move(y)};
}

int main(int argc, char** argv) {
  try {
    const std::string outDir = argc > 1 ? argv[1] : "embed-aot";
    auto net = std::make_shared<SpiralNet>();
    Model spec;
    spec.name = "spirals";
    spec.seed = 3;
    spec.module = net.get();
    spec.inputs = {{"x", DType::f32, {kBatch, 2}}};
    spec.targets = {{"labels", DType::i64, {kBatch}}};
    spec.forward = [net](const NamedTensors& in) -> NamedTensors { return {{"logits", net->forward(in["x"])}}; };
    spec.loss = [](const NamedTensors& out, const NamedTensors& t) { return cross_entropy(out["logits"], t["labels"]); };
    OptimizerConfig adam;
    adam.kind = OptimizerConfig::Kind::Adam;
    BuiltModel model = build(spec, adam);

    // Train: 1500 steps of fresh batches.
    std::unique_ptr<engine::Executor> step = engine::Executor::create(model.trainStep);
    std::mt19937_64 rng(7);
    rt::HostTensor lr(DType::f32, {});
    lr.set(0, 0.01);
    double loss = 0;
    for (int i = 1; i <= 1500; ++i) {
      auto [x, y] = spirals(kBatch, rng);
      loss = step->run({{"x", x}, {"labels", y}, {"lr", lr}}).at("loss").at(0);
      if (i % 500 == 0) std::printf("step %d: loss %.4f\n", i, loss);
    }

    // Test accuracy with the JIT, then the same inference graph as a C library.
    ir::Graph inference = model.inferenceForBatch(kTest);
    std::unique_ptr<engine::Executor> infer = engine::Executor::create(inference);
    infer->setParams(step->params());
    auto [tx, ty] = spirals(kTest, rng);
    rt::HostTensor logits = infer->run({{"x", tx}}).at("logits");
    int64_t correct = 0;
    for (int64_t i = 0; i < kTest; ++i) correct += (logits.at(2 * i + 1) > logits.at(2 * i)) == (ty.at(i) != 0);
    const double accuracy = static_cast<double>(correct) / kTest;
    std::printf("test accuracy (JIT): %.1f%%\n", 100 * accuracy);

    aot::ExportOptions eo;
    eo.name = "spirals";
    eo.outDir = outDir;
    eo.weights = step->params();
    eo.embedWeights = true;
    aot::ExportResult r = aot::exportLibrary(inference, eo);
    std::printf("exported %s (%lld bytes, %d kernels) and %s\n", r.library.c_str(),
                static_cast<long long>(r.libraryBytes), r.kernels, r.header.c_str());
    bool same = false;
    {
      aot::Library lib(r.library, "spirals");
      void* ctx = nullptr;
      if (lib.create(&ctx, nullptr, 0) != 0) throw Error(lib.errorMessage());
      rt::HostTensor out(DType::f32, {kTest, 2});
      if (lib.forward(ctx, tx.data(), out.data()) != 0) throw Error(lib.errorMessage());
      same = std::memcmp(out.data(), logits.data(), out.bytes()) == 0;
      lib.destroy(ctx);
    }
    std::printf("the library's logits %s the JIT's\n", same ? "equal" : "DIFFER FROM");
    return accuracy >= 0.9 && same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
