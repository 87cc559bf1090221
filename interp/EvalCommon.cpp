// The evaluator table and the helpers every op family shares.
#include "interp/Eval.h"

#include <cstring>

namespace kiln::interp::detail {

void EvalTable::add(ir::OpKind op, EvalFn fn) {
  auto i = static_cast<size_t>(op);
  KILN_ASSERT(fns[i] == nullptr, "two evaluators registered for op '{}'", ir::opName(op));
  KILN_ASSERT(!ir::opInfo(op).has(ir::kComposite), "evaluator registered for composite op '{}'", ir::opName(op));
  fns[i] = fn;
}

EvalFn findEvaluator(ir::OpKind op) {
  static const EvalTable table = [] {
    EvalTable t;
    addElementwiseEvaluators(t);
    addReduceEvaluators(t);
    addMovementEvaluators(t);
    addContractionEvaluators(t);
    addWindowEvaluators(t);
    addSourceEvaluators(t);
    addGradEvaluators(t);
    return t;
  }();
  return table.fns[static_cast<size_t>(op)];
}

HostTensor makeResult(const ir::Node& node) { return HostTensor(node.result->type.dtype, node.result->type.shape); }

void failAt(const ir::Node& node, const std::string& message) {
  std::vector<ir::TensorType> types;
  for (const ir::Value* v : node.operands) types.push_back(v->type);
  throw Error(node.loc, ir::describeOp(node.info(), types) + ": " + message);
}

int64_t loadInt(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i32: return t.as<int32_t>()[i];
    case DType::i64: return t.as<int64_t>()[i];
    case DType::boolean: return t.as<uint8_t>()[i] != 0 ? 1 : 0;
    default: KILN_ASSERT(false, "loadInt on a {} tensor", dtypeName(t.dtype()));
  }
  return 0;
}

void storeInt(HostTensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    // Two's-complement truncation: the wrap-around the integer ops document.
    case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); return;
    case DType::i64: t.as<int64_t>()[i] = v; return;
    case DType::boolean: t.as<uint8_t>()[i] = v != 0 ? 1 : 0; return;
    default: KILN_ASSERT(false, "storeInt on a {} tensor", dtypeName(t.dtype()));
  }
}

void copyElement(const HostTensor& src, int64_t from, HostTensor& dst, int64_t to) {
  KILN_ASSERT(src.dtype() == dst.dtype(), "copyElement from {} to {}", src.typeStr(), dst.typeStr());
  size_t size = static_cast<size_t>(dtypeSize(src.dtype()));
  std::memcpy(static_cast<char*>(dst.data()) + static_cast<size_t>(to) * size,
              static_cast<const char*>(src.data()) + static_cast<size_t>(from) * size, size);
}

std::vector<int64_t> unravel(int64_t i, const ir::Shape& shape) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return coords;
}

int64_t ravel(std::span<const int64_t> coords, std::span<const int64_t> strides) {
  KILN_ASSERT(coords.size() == strides.size(), "ravel: {} coordinates for {} strides", coords.size(), strides.size());
  int64_t i = 0;
  for (size_t d = 0; d < coords.size(); ++d) i += coords[d] * strides[d];
  return i;
}

std::vector<int64_t> broadcastIndices(const ir::Shape& in, const ir::Shape& out) {
  KILN_ASSERT(in.size() <= out.size(), "broadcast from rank {} to rank {}", in.size(), out.size());
  size_t lead = out.size() - in.size();
  std::vector<int64_t> inStrides = ir::rowMajorStrides(in);
  // A repeated (size-1) dimension contributes nothing to the input index.
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) {
    KILN_ASSERT(in[d] == out[lead + d] || in[d] == 1, "{} does not broadcast to {}", ir::shapeStr(in),
                ir::shapeStr(out));
    strides[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  }
  int64_t n = ir::numElements(out);
  std::vector<int64_t> result(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) result[i] = ravel(unravel(i, out), strides);
  return result;
}

}  // namespace kiln::interp::detail
