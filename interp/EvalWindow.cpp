// Pooling windows over NCHW tensors. Window (y, x) covers input rows y*stride - pad ..
// y*stride - pad + kernel - 1 (likewise columns); positions outside the input are padding.
#include "interp/Eval.h"

#include <cmath>

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

HostTensor evalPool(const ir::Node& node, Operands ops) {
  const HostTensor& x = *ops[0];
  HostTensor out = makeResult(node);
  const ir::Ints &kernel = node.attrInts("kernel"), &stride = node.attrInts("stride"), &pad = node.attrInts("padding");
  bool isMax = node.op == OpKind::MaxPool2d;
  bool includePad = !isMax && node.attrBool("count_include_pad");
  int64_t planes = x.shape()[0] * x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  int64_t oh = out.shape()[2], ow = out.shape()[3];
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t v = 0; v < ow; ++v) {
        // Max: padding is -inf, the identity, so skipping it is the same; NaN is sticky.
        double acc = isMax ? -INFINITY : 0.0;
        int64_t inside = 0;
        for (int64_t i = 0; i < spatial(kernel, 0); ++i) {
          int64_t ih = y * spatial(stride, 0) - spatial(pad, 0) + i;
          if (ih < 0 || ih >= height) continue;
          for (int64_t j = 0; j < spatial(kernel, 1); ++j) {
            int64_t iw = v * spatial(stride, 1) - spatial(pad, 1) + j;
            if (iw < 0 || iw >= width) continue;
            double e = x.at((p * height + ih) * width + iw);
            ++inside;
            if (!isMax) acc += e;
            else if (std::isnan(acc) || std::isnan(e)) acc = NAN;
            else if (e > acc) acc = e;
          }
        }
        if (!isMax) {
          // Without ceil mode a window never reaches past the padding, so the padded window
          // always holds kernel[0] * kernel[1] positions.
          double divisor = includePad ? static_cast<double>(spatial(kernel, 0) * spatial(kernel, 1))
                                      : static_cast<double>(inside);
          acc /= divisor;
        }
        out.set((p * oh + y) * ow + v, acc);
      }
    }
  }
  return out;
}

}  // namespace

void addWindowEvaluators(EvalTable& t) {
  t.add(OpKind::MaxPool2d, evalPool);
  t.add(OpKind::AvgPool2d, evalPool);
}

}  // namespace kiln::interp::detail
