// The finite-difference gradient checker. A case is a small f64 graph: graph inputs (the op's
// operands, integer and bool operands included), the op (or a chain of ops), and the scalar loss
//
//     loss = reduce_sum(result * R)
//
// where R is a fixed random tensor of the result's shape, so every output element enters the loss
// with its own weight and a gradient that mixes up elements cannot pass by symmetry. Composites
// are decomposed first; then passes::appendGradients adds d loss / d input for every float input,
// the reference interpreter evaluates them, and each element is compared with the central
// difference (loss(x + h e_i) - loss(x - h e_i)) / 2h of the forward graph.
//
// Tolerance: everything runs in f64. With h = 1e-6 the truncation error of the central difference
// is about h^2 |f'''| / 6 ~ 1e-12 and the rounding error about eps |loss| / h ~ 1e-10 for losses
// of order ten, so a correct rule lands within about 1e-8 (the worst seen over this suite is
// 3e-9); the check allows |analytic - numeric| <= 1e-6 + 1e-6 |numeric|, leaving room for steep
// functions while any wrong rule (a missing broadcast sum, a transposed operand, a wrong window)
// misses by far more. Inputs are drawn away
// from kinks (abs, relu, max ties) and outside the domain edges (log, sqrt, reciprocal) so the
// difference quotient never straddles a non-differentiable point.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "runtime/HostTensor.h"

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gradcheck {

using rt::HostTensor;

struct Tolerance {
  double h = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-6;
};

/// One graph input of a case. `wrt`: whether its gradient is checked (true for float inputs made
/// with arg(), false for integer/bool inputs and for fixed() ones).
struct Arg {
  HostTensor value;
  bool wrt = true;
};
Arg arg(HostTensor v);
Arg fixed(HostTensor v);

/// Builds the checked computation from the graph inputs (in the order of the case's args) and
/// returns its f64 result.
using Build = std::function<ir::Value*(ir::Graph&, std::span<ir::Value* const>)>;

/// What a check found, for messages and for callers that want the worst error.
struct Outcome {
  double maxAbsError = 0;  // worst |analytic - numeric| over every checked element
  int mismatches = 0;      // elements outside the tolerance
  bool ran = false;        // false when building, differentiating or running threw
};

/// Runs the check described in the file comment. Every failure is a gtest failure whose message
/// names `label`, the input (x0, x1, … in args order, with its type), the element and both values.
Outcome checkGradients(std::string_view label, std::vector<Arg> args, const Build& build, Tolerance tol = {});

/// The common case: one op applied to all args in order.
Outcome checkOp(std::string_view label, ir::OpKind op, std::vector<Arg> args, std::vector<ir::NamedAttr> attrs = {},
                Tolerance tol = {});

/// Graph::addNode with the attributes as a braced list.
inline ir::Value* node(ir::Graph& g, ir::OpKind op, std::vector<ir::Value*> operands,
                       const std::vector<ir::NamedAttr>& attrs = {}) {
  return g.addNode(op, std::move(operands), attrs);
}

/// Whether passes::appendGradients is documented to handle `op` (it is not in opsWithoutGradient).
bool hasGradientRule(ir::OpKind op);

/// A deterministic generator of test tensors (splitmix64, so values do not depend on the standard
/// library's distributions). All tensors are f64 unless said otherwise.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  /// Uniform in [0, 1).
  double next();
  int64_t below(int64_t n);

  HostTensor uniform(const ir::Shape& shape, double lo = -1, double hi = 1);
  /// In [lo, hi] with lo > 0: inside the domain of log, sqrt, rsqrt, pow's base.
  HostTensor positive(const ir::Shape& shape, double lo = 0.5, double hi = 2);
  /// |x| in [lo, hi] with a random sign: away from the kinks of abs, relu, max(x, 0).
  HostTensor awayFromZero(const ir::Shape& shape, double lo = 0.2, double hi = 1.5);
  /// Tensors whose elements are pairwise distinct across all of them, at least (hi-lo)/(2n) apart
  /// (n = total count): no ties for max, min, pooling or reductions, even after a step of h.
  std::vector<HostTensor> distinct(const std::vector<ir::Shape>& shapes, double lo = -2, double hi = 2);
  HostTensor distinct(const ir::Shape& shape, double lo = -2, double hi = 2);
  /// Integers in [0, n) of type `dtype` (i64 or i32).
  HostTensor indices(const ir::Shape& shape, int64_t n, DType dtype = DType::i64);
  HostTensor mask(const ir::Shape& shape);

 private:
  uint64_t state_;
};

/// An f64/integer tensor from literal values.
HostTensor f64(const ir::Shape& shape, const std::vector<double>& values);
HostTensor i64(const ir::Shape& shape, const std::vector<double>& values);

}  // namespace kiln::gradcheck
