// Shape and dtype rules for every op in ir/Ops.def. Messages are short and lowercase; ctx.fail
// prefixes them with the op name, the operand types and the source location.
#include "ir/ShapeRules.h"

#include <algorithm>
#include <limits>

namespace kiln::ir::rules {

namespace {

bool isNumeric(DType t) { return t != DType::boolean; }

/// A shape given in an attribute or computed by a rule (ir/Type.h shapeProblem).
void checkShapeAttr(const InferContext& ctx, const Shape& s, std::string_view what) {
  std::string problem = shapeProblem(s);
  ctx.check(problem.empty(), "{}: {}", what, problem);
}

int64_t axisOf(const InferContext& ctx, int64_t axis, int64_t rank, std::string_view attr) {
  int64_t a = normalizeAxis(axis, rank);
  ctx.check(a >= 0, "{} {} is out of range for rank {}", attr, axis, rank);
  return a;
}

void requireDType(const InferContext& ctx, size_t i, bool ok, std::string_view what) {
  ctx.check(ok, "operand {} must be {}, got {}", i, what, dtypeName(ctx.operand(i).dtype));
}

void requireSameDType(const InferContext& ctx) {
  for (size_t i = 1; i < ctx.numOperands(); ++i)
    ctx.check(ctx.operand(i).dtype == ctx.operand(0).dtype,
              "operands must have the same element type (the frontend inserts casts)");
}

Shape broadcastAll(const InferContext& ctx, size_t first) {
  Shape out = ctx.operand(first).shape;
  for (size_t i = first + 1; i < ctx.numOperands(); ++i)
    ctx.check(broadcastShapes(out, ctx.operand(i).shape, out), "shapes do not broadcast");
  return out;
}

// Window arithmetic in 128 bits: attributes come from users and files and may be huge.
int64_t windowOut(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  __int128 eff = static_cast<__int128>(dil) * (k - 1) + 1;
  __int128 span = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) - eff;
  return span < 0 ? 0 : static_cast<int64_t>(span / stride + 1);
}

void checkBounded(const InferContext& ctx, const Ints& values, std::string_view what) {
  for (int64_t v : values) ctx.check(v <= kMaxElements, "{} {} is too large", what, v);
}

}  // namespace

void checkResultSize(const InferContext& ctx, const TensorType& result) {
  checkShapeAttr(ctx, result.shape, "result shape");
}

// ---- elementwise -------------------------------------------------------------------------------

TensorType inferUnaryNumeric(const InferContext& ctx) {
  requireDType(ctx, 0, isNumeric(ctx.operand(0).dtype), "numeric");
  return ctx.operand(0);
}

TensorType inferUnaryFloat(const InferContext& ctx) {
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type (f32, f16, bf16, f64)");
  return ctx.operand(0);
}

TensorType inferUnaryBool(const InferContext& ctx) {
  requireDType(ctx, 0, ctx.operand(0).dtype == DType::boolean, "bool");
  return ctx.operand(0);
}

TensorType inferUnaryAny(const InferContext& ctx) { return ctx.operand(0); }

TensorType inferCast(const InferContext& ctx) { return {ctx.getDType("dtype"), ctx.operand(0).shape}; }

TensorType inferBinaryNumeric(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isNumeric(ctx.operand(0).dtype), "numeric");
  return {ctx.operand(0).dtype, broadcastAll(ctx, 0)};
}

TensorType inferBinaryFloat(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  return {ctx.operand(0).dtype, broadcastAll(ctx, 0)};
}

TensorType inferBinaryBool(const InferContext& ctx) {
  requireDType(ctx, 0, ctx.operand(0).dtype == DType::boolean, "bool");
  requireDType(ctx, 1, ctx.operand(1).dtype == DType::boolean, "bool");
  return {DType::boolean, broadcastAll(ctx, 0)};
}

TensorType inferCompare(const InferContext& ctx) {
  requireSameDType(ctx);
  return {DType::boolean, broadcastAll(ctx, 0)};
}

TensorType inferSelect(const InferContext& ctx) {
  requireDType(ctx, 0, ctx.operand(0).dtype == DType::boolean, "bool (the condition)");
  ctx.check(ctx.operand(1).dtype == ctx.operand(2).dtype, "both branches must have the same element type");
  return {ctx.operand(1).dtype, broadcastAll(ctx, 0)};
}

// ---- reductions --------------------------------------------------------------------------------

namespace {
TensorType reducedType(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  std::vector<bool> reduced(x.shape.size(), ctx.getInts("axes").empty());
  for (int64_t a : ctx.getInts("axes")) {
    int64_t ax = axisOf(ctx, a, x.rank(), "axis");
    ctx.check(!reduced[ax], "axis {} is listed twice", a);
    reduced[ax] = true;
  }
  bool keep = ctx.getBool("keepdim");
  Shape out;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (!reduced[i]) out.push_back(x.shape[i]);
    else if (keep) out.push_back(1);
  }
  return {x.dtype, out};
}
}  // namespace

TensorType inferReduce(const InferContext& ctx) {
  requireDType(ctx, 0, isNumeric(ctx.operand(0).dtype), "numeric");
  return reducedType(ctx);
}

TensorType inferReduceFloat(const InferContext& ctx) {
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  return reducedType(ctx);
}

TensorType inferArgReduce(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  requireDType(ctx, 0, isNumeric(x.dtype), "numeric");
  int64_t ax = axisOf(ctx, ctx.getInt("axis"), x.rank(), "axis");
  ctx.check(x.shape[ax] > 0, "cannot take argmax/argmin over an empty dimension");
  Shape out = x.shape;
  if (ctx.getBool("keepdim")) out[ax] = 1;
  else out.erase(out.begin() + ax);
  return {DType::i64, out};
}

// ---- movement ----------------------------------------------------------------------------------

TensorType inferReshape(const InferContext& ctx) {
  const Shape& s = ctx.getInts("shape");
  checkShapeAttr(ctx, s, "shape");
  ctx.check(numElements(s) == ctx.operand(0).numel(), "cannot reshape {} elements into {}", ctx.operand(0).numel(),
            shapeStr(s));
  return {ctx.operand(0).dtype, s};
}

TensorType inferPermute(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const Ints& perm = ctx.getInts("perm");
  ctx.check(static_cast<int64_t>(perm.size()) == x.rank(), "perm {} must list all {} dimensions", shapeStr(perm),
            x.rank());
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    ctx.check(p >= 0 && p < x.rank() && !seen[p], "perm {} is not a permutation of 0..{}", shapeStr(perm),
              x.rank() - 1);
    seen[p] = true;
    out.push_back(x.shape[p]);
  }
  return {x.dtype, out};
}

TensorType inferBroadcast(const InferContext& ctx) {
  const Shape& s = ctx.getInts("shape");
  checkShapeAttr(ctx, s, "shape");
  Shape out;
  ctx.check(broadcastShapes(ctx.operand(0).shape, s, out) && out == s, "cannot broadcast to {}", shapeStr(s));
  return {ctx.operand(0).dtype, s};
}

TensorType inferSlice(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const Ints &st = ctx.getInts("starts"), &en = ctx.getInts("ends"), &sp = ctx.getInts("steps");
  ctx.check(static_cast<int64_t>(st.size()) == x.rank() && en.size() == st.size() && sp.size() == st.size(),
            "starts, ends and steps need one entry per dimension ({})", x.rank());
  Shape out;
  for (size_t i = 0; i < st.size(); ++i) {
    ctx.check(sp[i] >= 1, "step {} of dimension {} must be >= 1", sp[i], i);
    ctx.check(0 <= st[i] && st[i] <= en[i] && en[i] <= x.shape[i],
              "slice [{}, {}) of dimension {} is outside 0..{}", st[i], en[i], i, x.shape[i]);
    out.push_back(static_cast<int64_t>((static_cast<__int128>(en[i]) - st[i] + sp[i] - 1) / sp[i]));
  }
  return {x.dtype, out};
}

TensorType inferConcat(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  ctx.check(x.rank() > 0, "cannot concatenate scalars");
  int64_t ax = axisOf(ctx, ctx.getInt("axis"), x.rank(), "axis");
  Shape out = x.shape;
  for (size_t i = 1; i < ctx.numOperands(); ++i) {
    const TensorType& y = ctx.operand(i);
    ctx.check(y.dtype == x.dtype && y.rank() == x.rank(), "operand {} differs in element type or rank", i);
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != ax) ctx.check(y.shape[d] == x.shape[d], "operand {} differs in dimension {}", i, d);
    out[ax] += y.shape[ax];
  }
  return {x.dtype, out};
}

TensorType inferPad(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  const Ints &lo = ctx.getInts("low"), &hi = ctx.getInts("high");
  ctx.check(static_cast<int64_t>(lo.size()) == x.rank() && hi.size() == lo.size(),
            "low and high need one entry per dimension ({})", x.rank());
  checkBounded(ctx, lo, "padding");
  checkBounded(ctx, hi, "padding");
  Shape out = x.shape;
  for (size_t i = 0; i < lo.size(); ++i) {
    ctx.check(lo[i] >= 0 && hi[i] >= 0, "padding must be non-negative");
    out[i] += lo[i] + hi[i];
  }
  checkShapeAttr(ctx, out, "padded shape");
  return {x.dtype, out};
}

TensorType inferGather(const InferContext& ctx) {
  const TensorType &data = ctx.operand(0), &idx = ctx.operand(1);
  requireDType(ctx, 1, isInteger(idx.dtype), "i32 or i64 (the indices)");
  int64_t ax = axisOf(ctx, ctx.getInt("axis"), data.rank(), "axis");
  Shape out(data.shape.begin(), data.shape.begin() + ax);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + ax + 1, data.shape.end());
  return {data.dtype, out};
}

TensorType inferOneHot(const InferContext& ctx) {
  requireDType(ctx, 0, isInteger(ctx.operand(0).dtype), "i32 or i64");
  int64_t n = ctx.getInt("num_classes");
  ctx.check(n >= 1, "num_classes must be >= 1, got {}", n);
  Shape out = ctx.operand(0).shape;
  out.push_back(n);
  checkShapeAttr(ctx, out, "result shape");
  return {ctx.getDType("dtype"), out};
}

// ---- contractions and windows ------------------------------------------------------------------

TensorType inferMatMul(const InferContext& ctx) {
  const TensorType &a = ctx.operand(0), &b = ctx.operand(1);
  requireSameDType(ctx);
  requireDType(ctx, 0, isNumeric(a.dtype), "numeric");
  ctx.check(a.rank() >= 2 && b.rank() >= 2, "both operands need rank >= 2");
  bool ta = ctx.getBool("transpose_a"), tb = ctx.getBool("transpose_b");
  int64_t m = a.shape[a.rank() - (ta ? 1 : 2)], k = a.shape[a.rank() - (ta ? 2 : 1)];
  int64_t k2 = b.shape[b.rank() - (tb ? 1 : 2)], n = b.shape[b.rank() - (tb ? 2 : 1)];
  ctx.check(k == k2, "contracted dimensions differ ({} vs {}{})", k, k2,
            ta || tb ? fmt::format(" with transpose_a={}, transpose_b={}", ta, tb) : std::string());
  Shape batch;
  ctx.check(broadcastShapes(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2),
                            batch),
            "batch dimensions do not broadcast");
  batch.push_back(m);
  batch.push_back(n);
  return {a.dtype, batch};
}

TensorType inferConv2d(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(x.dtype), "a float type");
  ctx.check(x.rank() == 4 && w.rank() == 4, "input must be NCHW and weight [O, C/groups, KH, KW]");
  const Ints &st = ctx.getInts("stride"), &pad = ctx.getInts("padding"), &dil = ctx.getInts("dilation");
  int64_t g = ctx.getInt("groups");
  ctx.check(st.size() == 2 && pad.size() == 2 && dil.size() == 2, "stride, padding and dilation need 2 entries");
  checkBounded(ctx, pad, "padding");
  checkBounded(ctx, dil, "dilation");
  ctx.check(st[0] >= 1 && st[1] >= 1 && dil[0] >= 1 && dil[1] >= 1 && pad[0] >= 0 && pad[1] >= 0,
            "stride and dilation must be >= 1 and padding >= 0");
  ctx.check(g >= 1 && x.shape[1] % g == 0 && w.shape[0] % g == 0, "groups {} must divide input channels {} and "
            "output channels {}", g, x.shape[1], w.shape[0]);
  ctx.check(w.shape[1] * g == x.shape[1], "weight has {} input channels per group, input has {} channels in {} "
            "group(s)", w.shape[1], x.shape[1], g);
  int64_t oh = windowOut(x.shape[2], w.shape[2], st[0], pad[0], dil[0]);
  int64_t ow = windowOut(x.shape[3], w.shape[3], st[1], pad[1], dil[1]);
  ctx.check(oh > 0 && ow > 0, "kernel is larger than the padded input");
  return {x.dtype, {x.shape[0], w.shape[0], oh, ow}};
}

TensorType inferPool2d(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  requireDType(ctx, 0, isFloat(x.dtype), "a float type");
  ctx.check(x.rank() == 4, "input must be NCHW");
  const Ints &k = ctx.getInts("kernel"), &st = ctx.getInts("stride"), &pad = ctx.getInts("padding");
  ctx.check(k.size() == 2 && st.size() == 2 && pad.size() == 2, "kernel, stride and padding need 2 entries");
  checkBounded(ctx, pad, "padding");
  ctx.check(k[0] >= 1 && k[1] >= 1 && st[0] >= 1 && st[1] >= 1, "kernel and stride must be >= 1");
  ctx.check(pad[0] >= 0 && pad[1] >= 0 && 2 * pad[0] <= k[0] && 2 * pad[1] <= k[1],
            "padding must be between 0 and half the kernel");
  int64_t oh = windowOut(x.shape[2], k[0], st[0], pad[0], 1);
  int64_t ow = windowOut(x.shape[3], k[1], st[1], pad[1], 1);
  ctx.check(oh > 0 && ow > 0, "window is larger than the padded input");
  return {x.dtype, {x.shape[0], x.shape[1], oh, ow}};
}

// ---- sources -----------------------------------------------------------------------------------

namespace {
/// The result type of a source op: its `shape` and `dtype` attributes.
TensorType sourceType(const InferContext& ctx) {
  checkShapeAttr(ctx, ctx.getInts("shape"), "shape");
  return {ctx.getDType("dtype"), ctx.getInts("shape")};
}

/// The optional step counter of the random ops (random, dropout): operand `i` when present.
void checkStepOperand(const InferContext& ctx, size_t i) {
  if (ctx.numOperands() <= i) return;
  const TensorType& step = ctx.operand(i);
  ctx.check(step.dtype == DType::i64 && step.rank() == 0, "the step operand must be an i64 scalar (i64[]), got {}",
            step.str());
}
}  // namespace

TensorType inferConstant(const InferContext& ctx) {
  TensorType t = sourceType(ctx);
  size_t n = ctx.getFloats("value").size();
  ctx.check(n == 1 || static_cast<int64_t>(n) == t.numel(), "value has {} elements; a constant of shape {} needs 1 or {}",
            n, shapeStr(t.shape), t.numel());
  return t;
}

TensorType inferIota(const InferContext& ctx) {
  TensorType t = sourceType(ctx);
  axisOf(ctx, ctx.getInt("axis"), t.rank(), "axis");
  ctx.check(isNumeric(t.dtype), "iota needs a numeric dtype");
  return t;
}

TensorType inferRandom(const InferContext& ctx) {
  TensorType t = sourceType(ctx);
  ctx.check(isFloat(t.dtype), "random needs a float dtype, got {}", dtypeName(t.dtype));
  ctx.check(ctx.getInt("seed") >= 0 && ctx.getInt("offset") >= 0, "seed and offset must be non-negative");
  checkStepOperand(ctx, 0);
  return t;
}

// ---- composites --------------------------------------------------------------------------------

TensorType inferLinear(const InferContext& ctx) {
  const TensorType &x = ctx.operand(0), &w = ctx.operand(1);
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(x.dtype), "a float type");
  ctx.check(x.rank() >= 1 && w.rank() == 2, "expects x[..., in] and weight[out, in]");
  ctx.check(x.shape.back() == w.shape[1], "input features {} do not match weight [out={}, in={}]", x.shape.back(),
            w.shape[0], w.shape[1]);
  if (ctx.numOperands() == 3)
    ctx.check(ctx.operand(2).shape == Shape{w.shape[0]}, "bias must be [{}]", w.shape[0]);
  Shape out = x.shape;
  out.back() = w.shape[0];
  return {x.dtype, out};
}

TensorType inferSoftmax(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  requireDType(ctx, 0, isFloat(x.dtype), "a float type");
  axisOf(ctx, ctx.getInt("axis"), x.rank(), "axis");
  return x;
}

namespace {
TensorType reducedLoss(const InferContext& ctx, const TensorType& perElement) {
  if (ctx.getStr("reduction") == "none") return perElement;
  return {perElement.dtype, {}};
}
}  // namespace

TensorType inferCrossEntropy(const InferContext& ctx) {
  const TensorType &logits = ctx.operand(0), &labels = ctx.operand(1);
  requireDType(ctx, 0, isFloat(logits.dtype), "a float type (logits)");
  requireDType(ctx, 1, isInteger(labels.dtype), "i32 or i64 (class indices)");
  ctx.check(logits.rank() == 2 && labels.rank() == 1 && labels.shape[0] == logits.shape[0],
            "expects logits [N, C] and labels [N]");
  double smoothing = ctx.getFloat("label_smoothing");
  ctx.check(smoothing >= 0 && smoothing <= 1, "label_smoothing must be in [0, 1], got {}", smoothing);
  return reducedLoss(ctx, {logits.dtype, {logits.shape[0]}});
}

TensorType inferPairLoss(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  ctx.check(ctx.operand(0).shape == ctx.operand(1).shape, "prediction and target shapes differ");
  return reducedLoss(ctx, ctx.operand(0));
}

TensorType inferLayerNorm(const InferContext& ctx) {
  const TensorType& x = ctx.operand(0);
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(x.dtype), "a float type");
  int64_t k = ctx.getInt("normalized_ndim");
  ctx.check(k >= 1 && k <= x.rank(), "normalized_ndim {} must be in 1..{}", k, x.rank());
  ctx.check(ctx.getFloat("eps") >= 0, "eps must be >= 0");
  Shape normalized(x.shape.end() - k, x.shape.end());
  for (size_t i = 1; i < ctx.numOperands(); ++i)
    ctx.check(ctx.operand(i).shape == normalized, "weight and bias must have shape {}", shapeStr(normalized));
  return x;
}

TensorType inferDropout(const InferContext& ctx) {
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  double p = ctx.getFloat("p");
  ctx.check(p >= 0 && p < 1, "p must be in [0, 1), got {}", p);
  ctx.check(ctx.getInt("seed") >= 0 && ctx.getInt("offset") >= 0, "seed and offset must be non-negative");
  checkStepOperand(ctx, 1);
  return ctx.operand(0);
}

TensorType inferEmbedding(const InferContext& ctx) {
  const TensorType &idx = ctx.operand(0), &w = ctx.operand(1);
  requireDType(ctx, 0, isInteger(idx.dtype), "i32 or i64 (token ids)");
  ctx.check(w.rank() == 2, "weight must be [num_embeddings, dim]");
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return {w.dtype, out};
}

TensorType inferAttention(const InferContext& ctx) {
  const TensorType &q = ctx.operand(0), &k = ctx.operand(1), &v = ctx.operand(2);
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(q.dtype), "a float type");
  ctx.check(q.rank() >= 2 && k.rank() == q.rank() && v.rank() == q.rank(), "q, k and v need the same rank >= 2");
  int64_t r = q.rank();
  ctx.check(q.shape[r - 1] == k.shape[r - 1], "q and k head sizes differ");
  ctx.check(k.shape[r - 2] == v.shape[r - 2], "k and v sequence lengths differ");
  ctx.check(std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) &&
                std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin()),
            "batch dimensions of q, k and v differ");
  if (ctx.getBool("causal")) ctx.check(q.shape[r - 2] == k.shape[r - 2], "causal attention needs L == S");
  Shape out = q.shape;
  out.back() = v.shape[r - 1];
  return {q.dtype, out};
}

// ---- gradient helpers --------------------------------------------------------------------------
// Each checks that the forward op it differentiates is well formed and that dy has the shape that
// forward op would produce.

namespace {
/// The shape `attr` names (the forward operand's shape), validated.
Shape shapeAttr(const InferContext& ctx, std::string_view attr) {
  const Shape& s = ctx.getInts(attr);
  checkShapeAttr(ctx, s, attr);
  return s;
}

Shape convOutShape(const InferContext& ctx, const Shape& x, const Shape& w) {
  const Ints &st = ctx.getInts("stride"), &pad = ctx.getInts("padding"), &dil = ctx.getInts("dilation");
  int64_t g = ctx.getInt("groups");
  ctx.check(x.size() == 4 && w.size() == 4, "input must be NCHW and weight [O, C/groups, KH, KW]");
  ctx.check(st.size() == 2 && pad.size() == 2 && dil.size() == 2, "stride, padding and dilation need 2 entries");
  checkBounded(ctx, pad, "padding");
  checkBounded(ctx, dil, "dilation");
  ctx.check(st[0] >= 1 && st[1] >= 1 && dil[0] >= 1 && dil[1] >= 1 && pad[0] >= 0 && pad[1] >= 0,
            "stride and dilation must be >= 1 and padding >= 0");
  ctx.check(g >= 1 && x[1] % g == 0 && w[0] % g == 0 && w[1] * g == x[1], "groups {} do not match input {} and "
            "weight {}", g, shapeStr(x), shapeStr(w));
  return {x[0], w[0], windowOut(x[2], w[2], st[0], pad[0], dil[0]), windowOut(x[3], w[3], st[1], pad[1], dil[1])};
}

Shape poolOutShape(const InferContext& ctx, const Shape& x) {
  const Ints &k = ctx.getInts("kernel"), &st = ctx.getInts("stride"), &pad = ctx.getInts("padding");
  ctx.check(x.size() == 4, "input must be NCHW");
  ctx.check(k.size() == 2 && st.size() == 2 && pad.size() == 2, "kernel, stride and padding need 2 entries");
  checkBounded(ctx, pad, "padding");
  ctx.check(k[0] >= 1 && k[1] >= 1 && st[0] >= 1 && st[1] >= 1, "kernel and stride must be >= 1");
  ctx.check(pad[0] >= 0 && pad[1] >= 0 && 2 * pad[0] <= k[0] && 2 * pad[1] <= k[1],
            "padding must be between 0 and half the kernel");
  return {x[0], x[1], windowOut(x[2], k[0], st[0], pad[0], 1), windowOut(x[3], k[1], st[1], pad[1], 1)};
}

void requireGradShape(const InferContext& ctx, size_t dyIndex, const Shape& expected) {
  ctx.check(ctx.operand(dyIndex).shape == expected, "dy must have the forward result's shape {}", shapeStr(expected));
}
}  // namespace

TensorType inferSliceGrad(const InferContext& ctx) {
  Shape full = shapeAttr(ctx, "shape");
  const Ints &st = ctx.getInts("starts"), &sp = ctx.getInts("steps");
  ctx.check(st.size() == full.size() && sp.size() == full.size(), "starts and steps need one entry per dimension ({})",
            full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    ctx.check(sp[i] >= 1 && st[i] >= 0 && st[i] <= full[i], "start {} / step {} of dimension {} out of range", st[i],
              sp[i], i);
    int64_t d = ctx.operand(0).rank() == static_cast<int64_t>(full.size()) ? ctx.operand(0).shape[i] : -1;
    ctx.check(d >= 0 && (d == 0 || st[i] + static_cast<__int128>(d - 1) * sp[i] < full[i]),
              "dy does not fit in dimension {} of {} at start {} with step {}", i, shapeStr(full), st[i], sp[i]);
  }
  return {ctx.operand(0).dtype, full};
}

TensorType inferScatterAdd(const InferContext& ctx) {
  const TensorType &idx = ctx.operand(0), &upd = ctx.operand(1);
  requireDType(ctx, 0, isInteger(idx.dtype), "i32 or i64 (the indices)");
  requireDType(ctx, 1, isNumeric(upd.dtype), "numeric");
  int64_t axis = ctx.getInt("axis"), dim = ctx.getInt("dim_size");
  ctx.check(dim >= 0, "dim_size must be >= 0");
  ctx.check(axis >= 0 && axis + idx.rank() <= upd.rank(), "axis {} with indices of rank {} does not fit updates {}",
            axis, idx.rank(), shapeStr(upd.shape));
  ctx.check(std::equal(idx.shape.begin(), idx.shape.end(), upd.shape.begin() + axis),
            "updates dimensions {}..{} must equal the indices' shape {}", axis, axis + idx.rank() - 1,
            shapeStr(idx.shape));
  Shape out(upd.shape.begin(), upd.shape.begin() + axis);
  out.push_back(dim);
  out.insert(out.end(), upd.shape.begin() + axis + idx.rank(), upd.shape.end());
  return {upd.dtype, out};
}

TensorType inferConv2dGradInput(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  Shape x = shapeAttr(ctx, "input_shape");
  requireGradShape(ctx, 0, convOutShape(ctx, x, ctx.operand(1).shape));
  return {ctx.operand(0).dtype, x};
}

TensorType inferConv2dGradWeight(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  Shape w = shapeAttr(ctx, "weight_shape");
  requireGradShape(ctx, 1, convOutShape(ctx, ctx.operand(0).shape, w));
  return {ctx.operand(0).dtype, w};
}

TensorType inferMaxPool2dGrad(const InferContext& ctx) {
  requireSameDType(ctx);
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  requireGradShape(ctx, 1, poolOutShape(ctx, ctx.operand(0).shape));
  return ctx.operand(0);
}

TensorType inferAvgPool2dGrad(const InferContext& ctx) {
  requireDType(ctx, 0, isFloat(ctx.operand(0).dtype), "a float type");
  Shape x = shapeAttr(ctx, "input_shape");
  requireGradShape(ctx, 0, poolOutShape(ctx, x));
  return {ctx.operand(0).dtype, x};
}

}  // namespace kiln::ir::rules
