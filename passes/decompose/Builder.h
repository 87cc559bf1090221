// Internal to the decompose pass: a small emitter that appends primitive nodes to the graph being
// rebuilt, all at the source location of the composite being expanded, plus the shared pieces
// (stable softmax, means, loss reductions) that several rules are made of. Not a public API.
#pragma once

#include "ir/Graph.h"

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace kiln::passes::decomp {

class Builder {
 public:
  Builder(ir::Graph& g, SourceLoc loc) : g_(g), loc_(std::move(loc)) {}

  /// Appends `op` (attributes resolved and the result type inferred by the graph).
  ir::Value* op(ir::OpKind op, std::vector<ir::Value*> operands, std::vector<ir::NamedAttr> attrs = {});
  /// A rank-0 splat constant; it combines with tensors through NumPy broadcasting.
  ir::Value* constant(double v, DType dtype);

  ir::Value* unary(ir::OpKind k, ir::Value* x) { return op(k, {x}); }
  ir::Value* add(ir::Value* a, ir::Value* b) { return op(ir::OpKind::Add, {a, b}); }
  ir::Value* sub(ir::Value* a, ir::Value* b) { return op(ir::OpKind::Sub, {a, b}); }
  ir::Value* mul(ir::Value* a, ir::Value* b) { return op(ir::OpKind::Mul, {a, b}); }
  ir::Value* div(ir::Value* a, ir::Value* b) { return op(ir::OpKind::Div, {a, b}); }
  /// x * c with c a constant of x's element type.
  ir::Value* scale(ir::Value* x, double c) { return mul(x, constant(c, x->type.dtype)); }

  /// reduce_sum / reduce_max over non-negative `axes`.
  ir::Value* reduce(ir::OpKind k, ir::Value* x, const ir::Ints& axes, bool keepdim);
  /// sum(x) * (1/n) over `axes`, n the number of reduced elements.
  ir::Value* mean(ir::Value* x, const ir::Ints& axes, bool keepdim);
  ir::Value* permute(ir::Value* x, const ir::Ints& perm);
  ir::Value* reshape(ir::Value* x, const ir::Shape& shape);

  /// Max-subtracted softmax / log-softmax along a non-negative axis.
  ir::Value* softmax(ir::Value* x, int64_t axis);
  ir::Value* logSoftmax(ir::Value* x, int64_t axis);

  /// The `reduction` attribute of a loss: "mean" and "sum" over every element, or "none".
  ir::Value* reduceLoss(ir::Value* perElement, const std::string& reduction);

 private:
  ir::Graph& g_;
  SourceLoc loc_;
};

/// All dimensions 0..rank-1 (an explicit axis list reads better in dumps than "[] = all").
ir::Ints allAxes(int64_t rank);

/// Builds the primitives that replace one node from its operands (already in the new graph).
using Expansion = std::function<ir::Value*(Builder& b, const ir::Node& node, std::span<ir::Value* const> xs)>;

/// Rebuilds `g`, copying its signature, outputs, updates and every node, except that each node
/// `selected` picks is replaced by what `expand` builds (at the node's location; of the node's
/// type, checked). The replacing value takes the node's result name when the expansion made it.
/// Leaves `g` alone when nothing is selected; returns how many nodes were expanded. Shared by the
/// decompose pass and the fuse pass's thin matmuls (passes/ThinMatMul.h).
int expandNodes(ir::Graph& g, const std::function<bool(const ir::Node&)>& selected, const Expansion& expand);

/// A rule expands one composite node. `xs` are its operands already mapped into the new graph;
/// the returned value replaces the node's result.
using Rule = ir::Value* (*)(Builder& b, const ir::Node& node, std::span<ir::Value* const> xs);

// One rule per composite op, grouped by family.
ir::Value* decomposeGelu(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeSilu(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeReduceMean(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeSoftmax(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeLogSoftmax(Builder&, const ir::Node&, std::span<ir::Value* const>);

ir::Value* decomposeCrossEntropy(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeMse(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeBceWithLogits(Builder&, const ir::Node&, std::span<ir::Value* const>);

ir::Value* decomposeLinear(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeEmbedding(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeLayerNorm(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeDropout(Builder&, const ir::Node&, std::span<ir::Value* const>);
ir::Value* decomposeAttention(Builder&, const ir::Node&, std::span<ir::Value* const>);

}  // namespace kiln::passes::decomp
