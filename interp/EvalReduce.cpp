// Reductions: reduce_sum/max/min over a set of axes, and argmax/argmin along one axis.
// Floats accumulate in double; integers in wrapping int64 arithmetic.
#include "interp/Eval.h"

#include <cmath>
#include <limits>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

/// For each input element, the linear index of the output element it reduces into: the reduced
/// coordinates are dropped, which is the same index with or without keepdim.
std::vector<int64_t> reductionTargets(const ir::Shape& in, const ir::Ints& axes) {
  auto rank = static_cast<int64_t>(in.size());
  ir::Shape kept = in;
  if (axes.empty()) kept.assign(in.size(), 1);
  for (int64_t a : axes) kept[ir::normalizeAxis(a, rank)] = 1;
  std::vector<int64_t> strides = ir::rowMajorStrides(kept);
  for (size_t d = 0; d < kept.size(); ++d)
    if (kept[d] == 1) strides[d] = 0;
  int64_t n = ir::numElements(in);
  std::vector<int64_t> targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) targets[i] = ravel(unravel(i, in), strides);
  return targets;
}

struct Reducer {
  OpKind op;
  double floatInit;
  double (*floatStep)(double acc, double x);
  int64_t intInit;
  int64_t (*intStep)(int64_t acc, int64_t x);
};

const Reducer kReducers[] = {
    {OpKind::ReduceSum, 0.0, [](double acc, double x) { return acc + x; }, 0, wrapAdd},
    // NaN is sticky: once the accumulator is NaN no comparison replaces it.
    {OpKind::ReduceMax, -INFINITY,
     [](double acc, double x) { return std::isnan(acc) || std::isnan(x) ? NAN : (x > acc ? x : acc); },
     std::numeric_limits<int64_t>::min(), [](int64_t acc, int64_t x) { return x > acc ? x : acc; }},
    {OpKind::ReduceMin, INFINITY,
     [](double acc, double x) { return std::isnan(acc) || std::isnan(x) ? NAN : (x < acc ? x : acc); },
     std::numeric_limits<int64_t>::max(), [](int64_t acc, int64_t x) { return x < acc ? x : acc; }},
};

HostTensor evalReduce(const ir::Node& node, Operands ops) {
  const Reducer* r = nullptr;
  for (const Reducer& c : kReducers)
    if (c.op == node.op) r = &c;
  KILN_ASSERT(r, "no reducer for op '{}'", ir::opName(node.op));
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  std::vector<int64_t> target = reductionTargets(x.shape(), node.attrInts("axes"));
  if (isFloat(x.dtype())) {
    std::vector<double> acc(static_cast<size_t>(out.numel()), r->floatInit);
    for (int64_t i = 0; i < x.numel(); ++i) acc[target[i]] = r->floatStep(acc[target[i]], x.at(i));
    for (int64_t i = 0; i < out.numel(); ++i) out.set(i, acc[i]);
  } else {
    // i32 extremes as initial values, so reduce_max over an empty i32 axis gives INT32_MIN.
    int64_t init = r->intInit;
    if (x.dtype() == DType::i32 && node.op != OpKind::ReduceSum)
      init = node.op == OpKind::ReduceMax ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
    std::vector<int64_t> acc(static_cast<size_t>(out.numel()), init);
    for (int64_t i = 0; i < x.numel(); ++i) acc[target[i]] = r->intStep(acc[target[i]], loadInt(x, i));
    for (int64_t i = 0; i < out.numel(); ++i) storeInt(out, i, acc[i]);
  }
  return out;
}

// argmax/argmin: `better(x, best)` says whether x replaces the current best; ties keep the first.
template <typename T>
int64_t bestIndex(const std::vector<T>& values, bool largest) {
  int64_t best = 0;
  for (size_t j = 1; j < values.size(); ++j) {
    T x = values[j], b = values[best];
    bool bNaN = false, xNaN = false;
    if constexpr (std::is_floating_point_v<T>) {
      bNaN = std::isnan(b);
      xNaN = std::isnan(x);
    }
    if (bNaN) break;  // a NaN is the extreme either way and the first one wins
    if (xNaN || (largest ? x > b : x < b)) best = static_cast<int64_t>(j);
  }
  return best;
}

HostTensor evalArgReduce(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  const ir::Shape& shape = x.shape();
  int64_t axis = ir::normalizeAxis(node.attrInt("axis"), x.rank());
  int64_t outer = 1, inner = 1, len = shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= shape[d];
  bool largest = node.op == OpKind::ArgMax;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto element = [&](int64_t j) { return (o * len + j) * inner + in; };
      int64_t best;
      if (isFloat(x.dtype())) {
        std::vector<double> v(static_cast<size_t>(len));
        for (int64_t j = 0; j < len; ++j) v[j] = x.at(element(j));
        best = bestIndex(v, largest);
      } else {
        std::vector<int64_t> v(static_cast<size_t>(len));
        for (int64_t j = 0; j < len; ++j) v[j] = loadInt(x, element(j));
        best = bestIndex(v, largest);
      }
      storeInt(out, o * inner + in, best);
    }
  }
  return out;
}

}  // namespace

void addReduceEvaluators(EvalTable& t) {
  for (const Reducer& r : kReducers) t.add(r.op, evalReduce);
  t.add(OpKind::ArgMax, evalArgReduce);
  t.add(OpKind::ArgMin, evalArgReduce);
}

}  // namespace kiln::interp::detail
