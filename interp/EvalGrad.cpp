// Gradient helpers (the ops autodiff emits): stop_gradient, slice_grad, scatter_add and the adjoints
// of conv2d, max_pool2d and avg_pool2d.
//
// Each adjoint walks exactly the loops of its forward evaluator (EvalContraction.cpp,
// EvalWindow.cpp, EvalMovement.cpp) and scatters where the forward op gathers, so that the pair is
// adjoint by construction: <f(x), dy> == <x, f_grad(dy)>. Floats accumulate in a double buffer and
// each output element is rounded to its dtype once, at the end.
#include "interp/Eval.h"

#include <cmath>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

/// Rounds a double accumulation buffer into a tensor of the node's result type.
HostTensor fromAccumulator(const ir::Node& node, const std::vector<double>& acc) {
  HostTensor out = makeResult(node);
  KILN_ASSERT(static_cast<int64_t>(acc.size()) == out.numel(), "accumulator of {} for {}", acc.size(), out.typeStr());
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, acc[static_cast<size_t>(i)]);
  return out;
}

HostTensor evalStopGradient(const ir::Node&, Operands ops) { return *ops[0]; }

HostTensor evalSliceGrad(const ir::Node& node, Operands ops) {
  const HostTensor& dy = *ops[0];
  HostTensor out = makeResult(node);  // zero-filled
  const ir::Ints &starts = node.attrInts("starts"), &steps = node.attrInts("steps");
  std::vector<int64_t> outStrides = ir::rowMajorStrides(out.shape());
  for (int64_t i = 0; i < dy.numel(); ++i) {
    // dy[c] came from x[start + c * step]; slices never revisit an element, so a copy suffices
    // (and keeps integer tensors exact).
    std::vector<int64_t> c = unravel(i, dy.shape());
    for (size_t d = 0; d < c.size(); ++d) c[d] = starts[d] + c[d] * steps[d];
    copyElement(dy, i, out, ravel(c, outStrides));
  }
  return out;
}

HostTensor evalScatterAdd(const ir::Node& node, Operands ops) {
  const HostTensor &indices = *ops[0], &updates = *ops[1];
  HostTensor out = makeResult(node);
  int64_t axis = node.attrInt("axis"), dim = node.attrInt("dim_size");
  auto indexRank = static_cast<size_t>(indices.rank());
  std::vector<int64_t> indexStrides = ir::rowMajorStrides(indices.shape());
  std::vector<int64_t> outStrides = ir::rowMajorStrides(out.shape());
  bool floats = isFloat(updates.dtype());
  std::vector<double> facc(floats ? static_cast<size_t>(out.numel()) : 0);
  std::vector<int64_t> iacc(floats ? 0 : static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < updates.numel(); ++i) {
    // Update coordinates: out[:axis] ++ indices ++ out[axis+1:], the transpose of gather's.
    std::vector<int64_t> c = unravel(i, updates.shape());
    int64_t where = ravel(std::span<const int64_t>(c.data() + axis, indexRank), indexStrides);
    int64_t index = loadInt(indices, where);
    if (index < 0 || index >= dim)
      failAt(node, fmt::format("index {} (element {} of the indices) is out of range [0, {}) along axis {}", index,
                               where, dim, axis));
    std::vector<int64_t> dst(c.begin(), c.begin() + axis);
    dst.push_back(index);
    dst.insert(dst.end(), c.begin() + axis + static_cast<int64_t>(indexRank), c.end());
    auto o = static_cast<size_t>(ravel(dst, outStrides));
    if (floats) facc[o] += updates.at(i);
    else iacc[o] = wrapAdd(iacc[o], loadInt(updates, i));  // integers wrap, as add does
  }
  if (floats) return fromAccumulator(node, facc);
  for (int64_t i = 0; i < out.numel(); ++i) storeInt(out, i, iacc[static_cast<size_t>(i)]);
  return out;
}

/// The geometry of a conv2d, read from its input, weight and output shapes and the node's attributes.
struct ConvGeometry {
  int64_t batch, channels, height, width;     // x
  int64_t outChannels, groupChannels, kh, kw;  // w
  int64_t oh, ow;                              // dy
  int64_t strideH, strideW, padH, padW, dilH, dilW, outPerGroup;

  ConvGeometry(const ir::Node& node, const ir::Shape& x, const ir::Shape& w, const ir::Shape& y)
      : batch(x[0]), channels(x[1]), height(x[2]), width(x[3]), outChannels(w[0]), groupChannels(w[1]), kh(w[2]),
        kw(w[3]), oh(y[2]), ow(y[3]) {
    const ir::Ints &st = node.attrInts("stride"), &pad = node.attrInts("padding"), &dil = node.attrInts("dilation");
    strideH = spatial(st, 0), strideW = spatial(st, 1);
    padH = spatial(pad, 0), padW = spatial(pad, 1);
    dilH = spatial(dil, 0), dilW = spatial(dil, 1);
    outPerGroup = outChannels / node.attrInt("groups");
  }

  /// Calls f(xIndex, wIndex, dyIndex) for every product x * w that conv2d adds into dy, in the
  /// forward evaluator's order; positions in the zero padding are skipped.
  template <typename F>
  void forEachTap(F&& f) const {
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t o = 0; o < outChannels; ++o) {
        int64_t firstChannel = (o / outPerGroup) * groupChannels;
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t v = 0; v < ow; ++v) {
            int64_t dyIndex = ((n * outChannels + o) * oh + y) * ow + v;
            for (int64_t c = 0; c < groupChannels; ++c)
              for (int64_t i = 0; i < kh; ++i) {
                int64_t ih = y * strideH - padH + i * dilH;
                if (ih < 0 || ih >= height) continue;
                for (int64_t j = 0; j < kw; ++j) {
                  int64_t iw = v * strideW - padW + j * dilW;
                  if (iw < 0 || iw >= width) continue;
                  f(((n * channels + firstChannel + c) * height + ih) * width + iw,
                    ((o * groupChannels + c) * kh + i) * kw + j, dyIndex);
                }
              }
          }
      }
  }
};

HostTensor evalConv2dGradInput(const ir::Node& node, Operands ops) {
  const HostTensor &dy = *ops[0], &w = *ops[1];
  const ir::Shape& xShape = node.result->type.shape;
  ConvGeometry g(node, xShape, w.shape(), dy.shape());
  std::vector<double> dx(static_cast<size_t>(ir::numElements(xShape)));
  g.forEachTap([&](int64_t xi, int64_t wi, int64_t yi) { dx[static_cast<size_t>(xi)] += w.at(wi) * dy.at(yi); });
  return fromAccumulator(node, dx);
}

HostTensor evalConv2dGradWeight(const ir::Node& node, Operands ops) {
  const HostTensor &x = *ops[0], &dy = *ops[1];
  const ir::Shape& wShape = node.result->type.shape;
  ConvGeometry g(node, x.shape(), wShape, dy.shape());
  std::vector<double> dw(static_cast<size_t>(ir::numElements(wShape)));
  g.forEachTap([&](int64_t xi, int64_t wi, int64_t yi) { dw[static_cast<size_t>(wi)] += x.at(xi) * dy.at(yi); });
  return fromAccumulator(node, dw);
}

/// The windows of a 2-d pooling over NCHW planes (window (y, v) covers input rows
/// y*stride - pad .. y*stride - pad + kernel - 1, likewise columns), as in EvalWindow.cpp.
struct PoolGeometry {
  int64_t planes, height, width, oh, ow, kh, kw, strideH, strideW, padH, padW;

  PoolGeometry(const ir::Node& node, const ir::Shape& x, const ir::Shape& y)
      : planes(x[0] * x[1]), height(x[2]), width(x[3]), oh(y[2]), ow(y[3]) {
    const ir::Ints &k = node.attrInts("kernel"), &st = node.attrInts("stride"), &pad = node.attrInts("padding");
    kh = spatial(k, 0), kw = spatial(k, 1);
    strideH = spatial(st, 0), strideW = spatial(st, 1);
    padH = spatial(pad, 0), padW = spatial(pad, 1);
  }

  /// Calls f(dyIndex, insideIndices) for every window; insideIndices are the window's input
  /// positions in row-major order, padding left out.
  template <typename F>
  void forEachWindow(F&& f) const {
    std::vector<int64_t> inside;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t v = 0; v < ow; ++v) {
          inside.clear();
          for (int64_t i = 0; i < kh; ++i) {
            int64_t ih = y * strideH - padH + i;
            if (ih < 0 || ih >= height) continue;
            for (int64_t j = 0; j < kw; ++j) {
              int64_t iw = v * strideW - padW + j;
              if (iw < 0 || iw >= width) continue;
              inside.push_back((p * height + ih) * width + iw);
            }
          }
          f((p * oh + y) * ow + v, std::span<const int64_t>(inside));
        }
  }
};

HostTensor evalMaxPool2dGrad(const ir::Node& node, Operands ops) {
  const HostTensor &x = *ops[0], &dy = *ops[1];
  PoolGeometry g(node, x.shape(), dy.shape());
  std::vector<double> dx(static_cast<size_t>(x.numel()));
  g.forEachWindow([&](int64_t yi, std::span<const int64_t> inside) {
    // The first maximum in row-major order: a later element wins only if strictly larger, and the
    // first NaN beats everything (max_pool2d propagates it). Padding (-inf) is never a candidate.
    int64_t best = -1;
    double bestValue = 0;
    for (int64_t xi : inside) {
      double e = x.at(xi);
      if (best < 0 || (!std::isnan(bestValue) && (std::isnan(e) || e > bestValue))) best = xi, bestValue = e;
    }
    if (best >= 0) dx[static_cast<size_t>(best)] += dy.at(yi);
  });
  return fromAccumulator(node, dx);
}

HostTensor evalAvgPool2dGrad(const ir::Node& node, Operands ops) {
  const HostTensor& dy = *ops[0];
  const ir::Shape& xShape = node.result->type.shape;
  PoolGeometry g(node, xShape, dy.shape());
  bool includePad = node.attrBool("count_include_pad");
  std::vector<double> dx(static_cast<size_t>(ir::numElements(xShape)));
  g.forEachWindow([&](int64_t yi, std::span<const int64_t> inside) {
    // The divisor avg_pool2d used: the whole kernel with count_include_pad (a window never reaches
    // past the padding), else the positions inside the input.
    double divisor = includePad ? static_cast<double>(g.kh * g.kw) : static_cast<double>(inside.size());
    double share = dy.at(yi) / divisor;
    for (int64_t xi : inside) dx[static_cast<size_t>(xi)] += share;
  });
  return fromAccumulator(node, dx);
}

}  // namespace

void addGradEvaluators(EvalTable& t) {
  t.add(OpKind::StopGradient, evalStopGradient);
  t.add(OpKind::SliceGrad, evalSliceGrad);
  t.add(OpKind::ScatterAdd, evalScatterAdd);
  t.add(OpKind::Conv2dGradInput, evalConv2dGradInput);
  t.add(OpKind::Conv2dGradWeight, evalConv2dGradWeight);
  t.add(OpKind::MaxPool2dGrad, evalMaxPool2dGrad);
  t.add(OpKind::AvgPool2dGrad, evalAvgPool2dGrad);
}

}  // namespace kiln::interp::detail
