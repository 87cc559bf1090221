// Contractions: matmul with broadcast batch dimensions and transpose flags, and conv2d (PyTorch
// cross-correlation with stride, zero padding, dilation and groups). Floats accumulate in double and
// round once at the end; integer matmul accumulates in wrapping int64.
#include "interp/Eval.h"

namespace kiln::interp::detail {
namespace {

using ir::OpKind;

HostTensor evalMatMul(const ir::Node& node, Operands ops) {
  const HostTensor &a = *ops[0], &b = *ops[1];
  HostTensor out = makeResult(node);
  const ir::Shape &as = a.shape(), &bs = b.shape(), &os = out.shape();
  bool ta = node.attrBool("transpose_a"), tb = node.attrBool("transpose_b");
  int64_t m = os[os.size() - 2], n = os[os.size() - 1], k = as[as.size() - (ta ? 2 : 1)];
  // Element (i, p) of op(a) and (p, j) of op(b), where op swaps the last two dimensions when its
  // transpose flag is set.
  auto aIndex = [&](int64_t i, int64_t p) { return ta ? p * m + i : i * k + p; };
  auto bIndex = [&](int64_t p, int64_t j) { return tb ? j * k + p : p * n + j; };
  ir::Shape batch(os.begin(), os.end() - 2);
  std::vector<int64_t> aBatch = broadcastIndices(ir::Shape(as.begin(), as.end() - 2), batch);
  std::vector<int64_t> bBatch = broadcastIndices(ir::Shape(bs.begin(), bs.end() - 2), batch);
  bool floats = isFloat(a.dtype());
  for (size_t bi = 0; bi < aBatch.size(); ++bi) {
    int64_t aBase = aBatch[bi] * m * k, bBase = bBatch[bi] * k * n, oBase = static_cast<int64_t>(bi) * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t p = 0; p < k; ++p) {
          int64_t ai = aBase + aIndex(i, p), bj = bBase + bIndex(p, j);
          if (floats) fsum += a.at(ai) * b.at(bj);
          else isum = wrapAdd(isum, wrapMul(loadInt(a, ai), loadInt(b, bj)));
        }
        if (floats) out.set(oBase + i * n + j, fsum);
        else storeInt(out, oBase + i * n + j, isum);
      }
    }
  }
  return out;
}

HostTensor evalConv2d(const ir::Node& node, Operands ops) {
  const HostTensor &x = *ops[0], &w = *ops[1];
  HostTensor out = makeResult(node);
  const ir::Ints &stride = node.attrInts("stride"), &pad = node.attrInts("padding"), &dil = node.attrInts("dilation");
  int64_t groups = node.attrInt("groups");
  int64_t batch = x.shape()[0], channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  int64_t outChannels = w.shape()[0], groupChannels = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  int64_t oh = out.shape()[2], ow = out.shape()[3];
  int64_t outPerGroup = outChannels / groups;
  auto xAt = [&](int64_t n, int64_t c, int64_t h, int64_t v) {
    return x.at(((n * channels + c) * height + h) * width + v);
  };
  auto wAt = [&](int64_t o, int64_t c, int64_t h, int64_t v) {
    return w.at(((o * groupChannels + c) * kh + h) * kw + v);
  };
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < outChannels; ++o) {
      int64_t firstChannel = (o / outPerGroup) * groupChannels;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t v = 0; v < ow; ++v) {
          double sum = 0;
          for (int64_t c = 0; c < groupChannels; ++c) {
            for (int64_t i = 0; i < kh; ++i) {
              int64_t ih = y * spatial(stride, 0) - spatial(pad, 0) + i * spatial(dil, 0);
              if (ih < 0 || ih >= height) continue;  // zero padding
              for (int64_t j = 0; j < kw; ++j) {
                int64_t iw = v * spatial(stride, 1) - spatial(pad, 1) + j * spatial(dil, 1);
                if (iw < 0 || iw >= width) continue;
                sum += xAt(n, firstChannel + c, ih, iw) * wAt(o, c, i, j);
              }
            }
          }
          out.set(((n * outChannels + o) * oh + y) * ow + v, sum);
        }
      }
    }
  }
  return out;
}

}  // namespace

void addContractionEvaluators(EvalTable& t) {
  t.add(OpKind::MatMul, evalMatMul);
  t.add(OpKind::Conv2d, evalConv2d);
}

}  // namespace kiln::interp::detail
