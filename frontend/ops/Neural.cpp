// Contractions, windows, sources and the neural-network composites (losses, norms, attention…).
#include "frontend/OpHelpers.h"
#include "frontend/Ops.h"

namespace kiln {
namespace {

using detail::opError;

std::vector<Tensor> present(std::initializer_list<Tensor> ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts)
    if (t.defined()) out.push_back(t);
  return out;
}

Ints pair2(std::string_view op, const Tensor& x, std::string_view what, Ints v, const SrcLoc& loc) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) opError(op, x, loc, fmt::format("{} needs 1 or 2 values, got {}", what, v.size()));
  return v;
}

Tensor source(Tracer& t, ir::OpKind op, std::vector<ir::NamedAttr> attrs, const SrcLoc& loc) {
  return t.emit(op, std::span<const Tensor>(), std::move(attrs), loc);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, SrcLoc loc) {
  return a.tracer().emit(ir::OpKind::MatMul, {a, b}, {}, loc);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, SrcLoc loc) {
  std::vector<Tensor> ops = present({x, weight, bias});
  return x.tracer().emit(ir::OpKind::Linear, ops, {}, loc);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& opts, SrcLoc loc) {
  Ints stride = pair2("conv2d", x, "stride", opts.stride, loc);
  Ints padding = pair2("conv2d", x, "padding", opts.padding, loc);
  Ints dilation = pair2("conv2d", x, "dilation", opts.dilation, loc);
  Tensor y = x.tracer().emit(
      ir::OpKind::Conv2d, {x, weight},
      {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", opts.groups}}, loc);
  if (!bias.defined()) return y;
  if (bias.rank() != 1 || bias.shape()[0] != y.shape()[1]) {
    Tensor ops[] = {x, weight, bias};
    opError("conv2d", ops, loc, fmt::format("bias must be [{}]", y.shape()[1]));
  }
  // bias[O] broadcasts over [N, O, OH, OW] as [O, 1, 1].
  return add(y, reshape(bias, {bias.shape()[0], 1, 1}, loc), loc);
}

Tensor max_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, SrcLoc loc) {
  kernel = pair2("max_pool2d", x, "kernel", kernel, loc);
  stride = stride.empty() ? kernel : pair2("max_pool2d", x, "stride", stride, loc);
  padding = pair2("max_pool2d", x, "padding", padding, loc);
  return x.tracer().emit(ir::OpKind::MaxPool2d, {x}, {{"kernel", kernel}, {"stride", stride}, {"padding", padding}},
                         loc);
}

Tensor avg_pool2d(const Tensor& x, Ints kernel, Ints stride, Ints padding, bool countIncludePad, SrcLoc loc) {
  kernel = pair2("avg_pool2d", x, "kernel", kernel, loc);
  stride = stride.empty() ? kernel : pair2("avg_pool2d", x, "stride", stride, loc);
  padding = pair2("avg_pool2d", x, "padding", padding, loc);
  return x.tracer().emit(
      ir::OpKind::AvgPool2d, {x},
      {{"kernel", kernel}, {"stride", stride}, {"padding", padding}, {"count_include_pad", countIncludePad}}, loc);
}

Tensor constant(Tracer& t, Shape shape, std::vector<double> values, DType dtype, SrcLoc loc) {
  return source(t, ir::OpKind::Constant, {{"shape", shape}, {"dtype", dtype}, {"value", ir::Floats(values)}}, loc);
}
Tensor full(Tracer& t, Shape shape, double value, DType dtype, SrcLoc loc) {
  return constant(t, std::move(shape), {value}, dtype, loc);
}
Tensor zeros(Tracer& t, Shape shape, DType dtype, SrcLoc loc) { return full(t, std::move(shape), 0.0, dtype, loc); }
Tensor ones(Tracer& t, Shape shape, DType dtype, SrcLoc loc) { return full(t, std::move(shape), 1.0, dtype, loc); }

Tensor iota(Tracer& t, Shape shape, int64_t axis, DType dtype, SrcLoc loc) {
  int64_t a = ir::normalizeAxis(axis, static_cast<int64_t>(shape.size()));
  if (a < 0)
    throw Error(SourceLoc::from(loc),
                fmt::format("op 'iota': axis {} is out of range for shape {}", axis, ir::shapeStr(shape)));
  return source(t, ir::OpKind::Iota, {{"shape", shape}, {"axis", a}, {"dtype", dtype}}, loc);
}
Tensor arange(Tracer& t, int64_t n, SrcLoc loc) { return iota(t, {n}, 0, DType::i64, loc); }

Tensor random_uniform(Tracer& t, Shape shape, uint64_t seed, uint64_t offset, DType dtype, SrcLoc loc) {
  return source(t, ir::OpKind::Random,
                {{"shape", shape}, {"dtype", dtype}, {"dist", std::string("uniform")},
                 {"seed", static_cast<int64_t>(seed)}, {"offset", static_cast<int64_t>(offset)}},
                loc);
}
Tensor random_normal(Tracer& t, Shape shape, uint64_t seed, uint64_t offset, DType dtype, SrcLoc loc) {
  return source(t, ir::OpKind::Random,
                {{"shape", shape}, {"dtype", dtype}, {"dist", std::string("normal")},
                 {"seed", static_cast<int64_t>(seed)}, {"offset", static_cast<int64_t>(offset)}},
                loc);
}

Tensor softmax(const Tensor& x, int64_t axis, SrcLoc loc) {
  int64_t a = detail::axisOrThrow("softmax", x, axis, x.rank(), loc);
  return x.tracer().emit(ir::OpKind::Softmax, {x}, {{"axis", a}}, loc);
}
Tensor log_softmax(const Tensor& x, int64_t axis, SrcLoc loc) {
  int64_t a = detail::axisOrThrow("log_softmax", x, axis, x.rank(), loc);
  return x.tracer().emit(ir::OpKind::LogSoftmax, {x}, {{"axis", a}}, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, std::string_view reduction, double label_smoothing,
                     SrcLoc loc) {
  return logits.tracer().emit(ir::OpKind::CrossEntropy, {logits, labels},
                              {{"reduction", std::string(reduction)}, {"label_smoothing", label_smoothing}}, loc);
}
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction, SrcLoc loc) {
  return input.tracer().emit(ir::OpKind::Mse, {input, target}, {{"reduction", std::string(reduction)}}, loc);
}
Tensor bce_with_logits(const Tensor& logits, const Tensor& target, std::string_view reduction, SrcLoc loc) {
  return logits.tracer().emit(ir::OpKind::BceWithLogits, {logits, target}, {{"reduction", std::string(reduction)}},
                              loc);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t normalizedNdim, double eps,
                  SrcLoc loc) {
  if (bias.defined() && !weight.defined()) {
    Tensor ops[] = {x, weight, bias};
    opError("layer_norm", ops, loc, "a bias needs a weight (pass ones as the weight)");
  }
  std::vector<Tensor> ops = present({x, weight, bias});
  return x.tracer().emit(ir::OpKind::LayerNorm, ops, {{"normalized_ndim", normalizedNdim}, {"eps", eps}}, loc);
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, SrcLoc loc) {
  return x.tracer().emit(ir::OpKind::Dropout, {x},
                         {{"p", p}, {"seed", static_cast<int64_t>(seed)}, {"offset", static_cast<int64_t>(offset)}},
                         loc);
}
Tensor dropout(const Tensor& x, double p, SrcLoc loc) {
  return dropout(x, p, x.tracer().nextRandomSeed(), 0, loc);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, SrcLoc loc) {
  return weight.tracer().emit(ir::OpKind::Embedding, {indices, weight}, {}, loc);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                    SrcLoc loc) {
  return q.tracer().emit(ir::OpKind::Attention, {q, k, v}, {{"causal", causal}, {"scale", scale}}, loc);
}

}  // namespace kiln
