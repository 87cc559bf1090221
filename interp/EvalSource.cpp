// Source ops: constant, iota and random (whose only operand is an optional step counter).
#include "interp/Eval.h"

#include "support/Philox.h"

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

HostTensor evalConstant(const ir::Node& node, Operands) {
  HostTensor out = makeResult(node);
  const ir::Floats& value = node.attrFloats("value");
  bool splat = value.size() == 1;
  KILN_ASSERT(splat || static_cast<int64_t>(value.size()) == out.numel(), "constant with {} values for {}",
              value.size(), out.typeStr());
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, value[splat ? 0 : i]);
  return out;
}

HostTensor evalIota(const ir::Node& node, Operands) {
  HostTensor out = makeResult(node);
  int64_t axis = ir::normalizeAxis(node.attrInt("axis"), out.rank());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t index = unravel(i, out.shape())[axis];
    if (isFloat(out.dtype())) out.set(i, static_cast<double>(index));
    else storeInt(out, i, index);
  }
  return out;
}

HostTensor evalRandom(const ir::Node& node, Operands operands) {
  HostTensor out = makeResult(node);
  auto seed = static_cast<uint64_t>(node.attrInt("seed"));
  auto offset = static_cast<uint64_t>(node.attrInt("offset"));
  // The step's two's-complement bits are the counter's high word (support/Philox.h).
  uint64_t step = operands.empty() ? 0 : static_cast<uint64_t>(loadInt(*operands[0], 0));
  bool normal = node.attrStr("dist") == "normal";
  for (int64_t i = 0; i < out.numel(); ++i) {
    auto index = static_cast<uint64_t>(i);
    out.set(i, normal ? philoxNormal(seed, offset, index, step) : philoxUniform(seed, offset, index, step));
  }
  return out;
}

}  // namespace

void addSourceEvaluators(EvalTable& t) {
  t.add(OpKind::Constant, evalConstant);
  t.add(OpKind::Iota, evalIota);
  t.add(OpKind::Random, evalRandom);
}

}  // namespace kiln::interp::detail
