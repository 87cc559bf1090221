// autodiff: reverse-mode differentiation over the graph IR. Appends to a graph the gradient of a
// scalar float loss with respect to chosen values (parameters, inputs or intermediate results),
// so one graph holds forward and backward and later compiles to one program.
//
// Works on primitives: composite ops are differentiated through their decompositions (run
// `decompose` first; the "autodiff" pass does). One gradient rule per primitive op lives in
// passes/autodiff/ by op family, in a table keyed by OpKind (a test checks that every op has a
// rule or is listed as having no gradient, with the reason). Backward nodes carry the source
// location of the forward node they differentiate. A value used several times accumulates its
// gradient contributions; integer and bool values, and values behind stop_gradient, get none.
// Nothing here assumes the loss is a forward value, so gradients of gradients stay possible.
#pragma once

#include "ir/Graph.h"
#include "passes/Pass.h"

#include <span>
#include <string>
#include <vector>

namespace kiln::passes {

struct GradientResult {
  /// One per requested value, in order: its gradient (same type as the value). A value the loss
  /// does not depend on gets a zero tensor and a warning.
  std::vector<ir::Value*> grads;
  std::vector<std::string> warnings;
};

/// Appends the backward computation of `loss` (a scalar, float) with respect to each of `wrt`
/// (float values of `g`). The graph must hold primitives only. `seed` is the adjoint the sweep
/// starts from, d(objective)/d(loss): ones when null; a value of `g` with the loss's type gives
/// the gradients of seed * loss (f16 loss scaling seeds with its scale). Errors (kiln::Error):
/// `loss` not scalar or not float, a `wrt` value that is integer/bool or not in `g`, a seed not in
/// `g` or of another type, a composite op.
GradientResult appendGradients(ir::Graph& g, ir::Value* loss, std::span<ir::Value* const> wrt,
                               ir::Value* seed = nullptr);

/// The registered "autodiff" pass: decomposes composites, then differentiates the output named
/// "loss" with respect to every float parameter, adding outputs "grad.<parameter name>".
void autodiff(ir::Graph& g, const PassContext& ctx = {});

/// Ops without a gradient rule and why (comparisons, argmax, integer sources, …): the list the
/// documentation and the coverage test use.
struct NoGradient {
  ir::OpKind op;
  const char* reason;
};
std::span<const NoGradient> opsWithoutGradient();

}  // namespace kiln::passes
