// Parameter initializers as PyTorch defines them, and the deterministic seeds they draw with.
//
// An Init says how to fill a parameter; it becomes an ir::Initializer once the parameter's full
// name is known, with seed = deriveSeed(model seed, name). The seed depends on the name, not on
// creation order, so adding a layer does not change every other layer's initial weights, and it
// is computed with a fixed hash (FNV-1a + SplitMix64), identical on every platform and run.
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <string_view>

namespace kiln {

/// 64-bit FNV-1a of `s`.
uint64_t fnv1a64(std::string_view s);
/// SplitMix64 finalizer: a bijective mix of 64 bits.
uint64_t mix64(uint64_t x);
/// The seed of the parameter (or random op) called `name` in a model seeded with `modelSeed`;
/// always below 2^63.
uint64_t deriveSeed(uint64_t modelSeed, std::string_view name);

struct Init {
  enum class Kind : uint8_t { Zeros, Ones, Constant, Uniform, Normal };
  Kind kind = Kind::Zeros;
  double a = 0;  // constant: value; uniform: low; normal: mean
  double b = 0;  // uniform: high; normal: std

  /// The IR initializer with `seed` (ignored by the non-random kinds, which get seed 0).
  ir::Initializer resolve(uint64_t seed) const;
};

namespace init {
Init zeros();
Init ones();
Init constant(double value);
Init uniform(double low, double high);
Init normal(double mean, double std);
/// torch.nn.init.kaiming_uniform_(w, a): bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a²)).
/// With PyTorch's default a = sqrt(5) (nn.Linear, nn.Conv2d) the bound is 1 / sqrt(fan_in).
Init kaimingUniform(int64_t fanIn, double a = 2.23606797749979);
/// torch.nn.init.xavier_uniform_: bound = gain * sqrt(6 / (fan_in + fan_out)).
Init xavierUniform(int64_t fanIn, int64_t fanOut, double gain = 1.0);
/// PyTorch's default bias of nn.Linear / nn.Conv2d: uniform(±1/sqrt(fan_in)).
Init biasUniform(int64_t fanIn);
}  // namespace init

}  // namespace kiln
