// The model zoo: small reference models built with the DSL, used by tests, benchmarks, examples
// and the `kiln` tool. docs/MODELS.md lists each model's inputs, parameters and outputs.
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// tiny_mlp, mnist_mlp, simplenet, cnn, lstm, transformer.
std::vector<std::string> zooModelNames();

struct ZooOptions {
  int64_t batch = 32;
  /// Adds the label/target input and a `loss` output (mean reduction) next to the prediction.
  bool withLoss = true;
  /// The model seed: parameter initializers derive from it and the parameter names.
  uint64_t seed = 0;
};

/// The graph of zoo model `name` (the graph is named after the model). An unknown name or a
/// non-positive batch is a kiln::Error; the message lists the known models.
ir::Graph buildZooModel(std::string_view name, const ZooOptions& opts = {});

}  // namespace kiln
