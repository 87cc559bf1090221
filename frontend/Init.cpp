#include "frontend/Init.h"

#include <cmath>

namespace kiln {

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t deriveSeed(uint64_t modelSeed, std::string_view name) {
  // 63 bits, so the seed also fits the IR's signed integer attributes.
  return mix64(mix64(modelSeed) ^ fnv1a64(name)) >> 1;
}

ir::Initializer Init::resolve(uint64_t seed) const {
  using K = ir::Initializer::Kind;
  switch (kind) {
    case Kind::Zeros: return {K::Zeros, 0, 0, 0};
    case Kind::Ones: return {K::Ones, 0, 0, 0};
    case Kind::Constant: return {K::Constant, a, 0, 0};
    case Kind::Uniform: return {K::Uniform, a, b, seed};
    case Kind::Normal: return {K::Normal, a, b, seed};
  }
  KILN_ASSERT(false, "unknown init kind {}", static_cast<int>(kind));
  return {};
}

namespace init {

Init zeros() { return {Init::Kind::Zeros, 0, 0}; }
Init ones() { return {Init::Kind::Ones, 0, 0}; }
Init constant(double value) { return {Init::Kind::Constant, value, 0}; }
Init uniform(double low, double high) {
  KILN_CHECK(low <= high, "uniform initializer: low {} is greater than high {}", low, high);
  return {Init::Kind::Uniform, low, high};
}
Init normal(double mean, double std) {
  KILN_CHECK(std >= 0, "normal initializer: negative standard deviation {}", std);
  return {Init::Kind::Normal, mean, std};
}

Init kaimingUniform(int64_t fanIn, double a) {
  KILN_CHECK(fanIn > 0, "kaiming_uniform initializer: fan_in must be positive, got {}", fanIn);
  // bound = sqrt(6 / (1 + a²)) / sqrt(fan_in). a² is snapped to an integer when it is one up to
  // rounding, so PyTorch's default a = sqrt(5) gives exactly 1/sqrt(fan_in), the bias's bound.
  double a2 = a * a;
  if (std::abs(a2 - std::round(a2)) < 1e-9) a2 = std::round(a2);
  double bound = std::sqrt(6.0 / (1.0 + a2)) / std::sqrt(static_cast<double>(fanIn));
  return uniform(-bound, bound);
}

Init xavierUniform(int64_t fanIn, int64_t fanOut, double gain) {
  KILN_CHECK(fanIn + fanOut > 0, "xavier_uniform initializer: fan_in + fan_out must be positive");
  double bound = gain * std::sqrt(6.0 / static_cast<double>(fanIn + fanOut));
  return uniform(-bound, bound);
}

Init biasUniform(int64_t fanIn) {
  KILN_CHECK(fanIn > 0, "bias initializer: fan_in must be positive, got {}", fanIn);
  double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
  return uniform(-bound, bound);
}

}  // namespace init
}  // namespace kiln
