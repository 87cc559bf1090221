// Movement ops: each output element is a byte-exact copy of one input element (or a fill value),
// so every evaluator is an index map from output coordinates to input coordinates.
#include "interp/Eval.h"

#include <cstring>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

HostTensor evalReshape(const ir::Node& node, Operands ops) {
  HostTensor out = makeResult(node);
  KILN_ASSERT(out.bytes() == ops[0]->bytes(), "reshape changes the byte count");
  if (out.bytes() > 0) std::memcpy(out.data(), ops[0]->data(), out.bytes());
  return out;
}

HostTensor evalPermute(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  const ir::Ints& perm = node.attrInts("perm");
  std::vector<int64_t> inStrides = ir::rowMajorStrides(x.shape());
  // Output dimension d walks input dimension perm[d].
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) strides[d] = inStrides[perm[d]];
  for (int64_t i = 0; i < out.numel(); ++i) copyElement(x, ravel(unravel(i, out.shape()), strides), out, i);
  return out;
}

HostTensor evalBroadcast(const ir::Node& node, Operands ops) {
  HostTensor out = makeResult(node);
  std::vector<int64_t> src = broadcastIndices(ops[0]->shape(), out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) copyElement(*ops[0], src[i], out, i);
  return out;
}

HostTensor evalSlice(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  const ir::Ints &starts = node.attrInts("starts"), &steps = node.attrInts("steps");
  std::vector<int64_t> inStrides = ir::rowMajorStrides(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, out.shape());
    for (size_t d = 0; d < c.size(); ++d) c[d] = starts[d] + c[d] * steps[d];
    copyElement(x, ravel(c, inStrides), out, i);
  }
  return out;
}

HostTensor evalConcat(const ir::Node& node, Operands ops) {
  HostTensor out = makeResult(node);
  int64_t axis = ir::normalizeAxis(node.attrInt("axis"), out.rank());
  std::vector<int64_t> outStrides = ir::rowMajorStrides(out.shape());
  int64_t offset = 0;
  for (const HostTensor* x : ops) {
    for (int64_t i = 0; i < x->numel(); ++i) {
      std::vector<int64_t> c = unravel(i, x->shape());
      c[axis] += offset;
      copyElement(*x, i, out, ravel(c, outStrides));
    }
    offset += x->shape()[axis];
  }
  return out;
}

HostTensor evalPad(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  const ir::Ints& low = node.attrInts("low");
  double value = node.attrFloat("value");
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, value);
  std::vector<int64_t> outStrides = ir::rowMajorStrides(out.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, x.shape());
    for (size_t d = 0; d < c.size(); ++d) c[d] += low[d];
    copyElement(x, i, out, ravel(c, outStrides));
  }
  return out;
}

HostTensor evalGather(const ir::Node& node, Operands ops) {
  const HostTensor &data = *ops[0], &indices = *ops[1];
  HostTensor out = makeResult(node);
  int64_t axis = ir::normalizeAxis(node.attrInt("axis"), data.rank());
  int64_t dim = data.shape()[axis];
  std::vector<int64_t> dataStrides = ir::rowMajorStrides(data.shape());
  std::vector<int64_t> indexStrides = ir::rowMajorStrides(indices.shape());
  auto indexRank = static_cast<size_t>(indices.rank());
  for (int64_t i = 0; i < out.numel(); ++i) {
    // Output coordinates: data[:axis] ++ indices ++ data[axis+1:].
    std::vector<int64_t> c = unravel(i, out.shape());
    std::span<const int64_t> indexCoords(c.data() + axis, indexRank);
    int64_t where = ravel(indexCoords, indexStrides);
    int64_t index = loadInt(indices, where);
    if (index < 0 || index >= dim)
      failAt(node, fmt::format("index {} (element {} of the indices) is out of range [0, {}) along axis {}", index,
                               where, dim, axis));
    std::vector<int64_t> src(c.begin(), c.begin() + axis);
    src.push_back(index);
    src.insert(src.end(), c.begin() + axis + static_cast<int64_t>(indexRank), c.end());
    copyElement(data, ravel(src, dataStrides), out, i);
  }
  return out;
}

HostTensor evalOneHot(const ir::Node& node, Operands ops) {
  const HostTensor& indices = *ops[0];
  HostTensor out = makeResult(node);  // zero-filled
  int64_t classes = node.attrInt("num_classes");
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t index = loadInt(indices, i);
    if (index >= 0 && index < classes) out.set(i * classes + index, 1.0);
  }
  return out;
}

}  // namespace

void addMovementEvaluators(EvalTable& t) {
  t.add(OpKind::Reshape, evalReshape);
  t.add(OpKind::Permute, evalPermute);
  t.add(OpKind::Broadcast, evalBroadcast);
  t.add(OpKind::Slice, evalSlice);
  t.add(OpKind::Concat, evalConcat);
  t.add(OpKind::Pad, evalPad);
  t.add(OpKind::Gather, evalGather);
  t.add(OpKind::OneHot, evalOneHot);
}

}  // namespace kiln::interp::detail
