// The decompose pass: rebuilds the graph, copying primitives and expanding each composite through
// its rule (passes/decompose/*.cpp). The rule table below is the one place that says which rule
// expands which op.
#include "passes/Decompose.h"

#include "passes/decompose/Builder.h"


namespace kiln::passes {

using ir::OpKind;
using ir::Value;

namespace {

struct RuleEntry {
  OpKind op;
  decomp::Rule rule;
};

constexpr RuleEntry kRules[] = {
    {OpKind::Linear, decomp::decomposeLinear},
    {OpKind::Gelu, decomp::decomposeGelu},
    {OpKind::Silu, decomp::decomposeSilu},
    {OpKind::ReduceMean, decomp::decomposeReduceMean},
    {OpKind::Softmax, decomp::decomposeSoftmax},
    {OpKind::LogSoftmax, decomp::decomposeLogSoftmax},
    {OpKind::CrossEntropy, decomp::decomposeCrossEntropy},
    {OpKind::Mse, decomp::decomposeMse},
    {OpKind::BceWithLogits, decomp::decomposeBceWithLogits},
    {OpKind::LayerNorm, decomp::decomposeLayerNorm},
    {OpKind::Dropout, decomp::decomposeDropout},
    {OpKind::Embedding, decomp::decomposeEmbedding},
    {OpKind::Attention, decomp::decomposeAttention},
};

decomp::Rule findRule(OpKind op) {
  for (const RuleEntry& e : kRules)
    if (e.op == op) return e.rule;
  return nullptr;
}

}  // namespace

bool hasDecomposition(OpKind op) { return findRule(op) != nullptr; }

void decompose(ir::Graph& g) {
  decomp::expandNodes(
      g, [](const ir::Node& n) { return n.info().has(ir::kComposite); },
      [](decomp::Builder& b, const ir::Node& n, std::span<Value* const> xs) {
        decomp::Rule rule = findRule(n.op);
        KILN_ASSERT(rule != nullptr, "composite op '{}' has no decomposition rule", n.info().name);
        return rule(b, n, xs);
      });
}

}  // namespace kiln::passes
