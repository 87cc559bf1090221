// The model zoo: small reference models built with the DSL, used by tests, benchmarks, examples
// and the `kiln` tool. docs/MODELS.md lists each model's inputs, parameters and outputs.
#pragma once

#include "frontend/Build.h"
#include "ir/Graph.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// tiny_mlp, mnist_mlp, simplenet, cnn, lstm, transformer.
std::vector<std::string> zooModelNames();

/// Whether a MODEL argument (`kiln aot`, `kiln bench`, `kiln explain`) names a .kir file rather
/// than a zoo model: it ends in .kir, or it exists on disk and is not a bare zoo model name. `cnn`
/// stays the zoo model beside a folder or file of that name (an earlier export's output folder);
/// `./cnn` is the file.
bool namesKirFile(const std::string& model);

struct ZooOptions {
  int64_t batch = 32;
  /// Adds the label/target input and a `loss` output (mean reduction) next to the prediction.
  bool withLoss = true;
  /// The model seed: parameter initializers derive from it and the parameter names.
  uint64_t seed = 0;
};

/// Zoo model `name` as a build spec (frontend/Build.h) at opts.batch and opts.seed, owning its
/// modules, for kiln::build; opts.withLoss does not apply. An unknown name or a non-positive batch
/// is a kiln::Error; the message lists the known models.
Model zooModel(std::string_view name, const ZooOptions& opts = {});

/// The forward graph of zoo model `name` (buildForward of zooModel; named after the model), with
/// the label input and the `loss` output when opts.withLoss.
ir::Graph buildZooModel(std::string_view name, const ZooOptions& opts = {});

}  // namespace kiln
