// The op kernels of the CUDA backend (RenderParts.h renderOpKernel): one entry point per kernel,
// launched once, each thread computing whole elements of the result in a grid-stride loop (blocks of
// 256 threads, at most 4096 blocks). No element is written by two threads and nothing is added
// with atomics, so every result is the same bits on every run:
//
//   concat, gather, slice_grad   a thread per result element copies the element's bits (or writes 0)
//   one_hot, random              a thread per result element (random: Philox of the step counter
//                                read from its operand, support/Philox.h)
//   argmax / argmin              a thread per result element scanning the axis; a scan along the last
//                                axis of 64 or more elements takes a warp per row (lanes stride the
//                                row, shuffles combine keeping the first extreme)
//   scatter_add                  a thread per result element (o, d, t) sums the updates whose index is
//                                d, in the order of the indices: the block stages 256 indices at a
//                                time in shared memory and every thread scans them. Work grows as
//                                result size × index count, cheap for embedding gradients of the
//                                zoo's sizes; deterministic by construction, unlike atomics.
//   max/avg pooling              a thread per output element over its window
//   pooling gradients            a thread per input element summing, in window order, what the
//                                windows covering it send it (max: dy of each window whose first
//                                maximum it is, recomputed per window; avg: dy / divisor)
//
// Semantics are the CPU backend's (codegen/cpu/RenderOps.cpp, RenderPool.cpp), checked there
// against the interpreter: copies are bit-exact, indices outside their range read 0 (gather) or
// are skipped (scatter_add, one_hot), argmax/argmin keep the first extreme with a NaN winning
// outright, max pooling writes the canonical NaN where a window holds a NaN, sums of f16/bf16
// accumulate in f32 and round once.
//
// Every entry takes every buffer of the kernel in order (Render.h: one typed pointer each).
#include "codegen/cuda/ExprEmitter.h"
#include "codegen/cuda/RenderParts.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace kiln::cuda {
namespace {

using ir::OpKind;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 4096;

int64_t product(const ir::Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

/// An attribute with one value per spatial dimension, or one for both.
int64_t spatial(const ir::Ints& v, size_t i) { return v.size() == 1 ? v[0] : v.at(i); }

class OpRenderer {
 public:
  explicit OpRenderer(const kernels::Kernel& k) : k_(k), n_(*k.op), name_(identifier(k.name)) {
    KILN_CHECK(k.outputs.size() == 1, "kernel '{}': an op kernel writes one result, not {}", k.name,
               k.outputs.size());
    // Flat indices (plus one grid's stride) in `int` when every buffer is small enough.
    int64_t largest = 0;
    for (const kernels::Buffer& b : k.buffers) largest = std::max(largest, b.type.numel());
    if (largest + kMaxBlocks * kBlock >= std::numeric_limits<int32_t>::max()) idx_ = "long long";
  }

  RenderedKernel render() {
    out_.name = k_.name;
    switch (n_.op) {
      case OpKind::Concat: concat(); break;
      case OpKind::Gather: gather(); break;
      case OpKind::ScatterAdd: scatterAdd(); break;
      case OpKind::OneHot: oneHot(); break;
      case OpKind::SliceGrad: sliceGrad(); break;
      case OpKind::ArgMax:
      case OpKind::ArgMin: argReduce(); break;
      case OpKind::Random: random(); break;
      case OpKind::MaxPool2d:
      case OpKind::AvgPool2d: pool(); break;
      case OpKind::MaxPool2dGrad: maxPoolGrad(); break;
      case OpKind::AvgPool2dGrad: avgPoolGrad(); break;
      default: KILN_THROW("kernel '{}': the CUDA backend has no op kernel for '{}'", k_.name, ir::opName(n_.op));
    }
    return out_;
  }

 private:
  const ir::TensorType& inType(size_t i) const { return k_.buffers[k_.inputs.at(i)].type; }
  const ir::TensorType& outType() const { return k_.buffers[k_.outputs[0]].type; }
  std::string in(size_t i) const { return bufferVar(k_.inputs.at(i)); }
  std::string out() const { return bufferVar(k_.outputs[0]); }
  /// An integer constant in the index type.
  std::string c(int64_t v) const {
    return v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()
               ? fmt::format("{}LL", v)
               : std::to_string(v);
  }

  /// The entry `name_` with `body` inside and its launch of `blocks` blocks of kBlock threads.
  void entry(const std::string& comment, const std::string& body, int64_t blocks) {
    std::vector<int32_t> all(k_.buffers.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    out_.code += fmt::format("// {}\nextern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}}}\n", comment,
                             kBlock, name_, bufferParams(k_, all, k_.outputs), body);
    Launch l;
    l.entry = name_;
    l.grid = {std::clamp<int64_t>(blocks, 1, kMaxBlocks), 1, 1};
    l.block = {kBlock, 1, 1};
    for (size_t i = 0; i < all.size(); ++i) l.args.push_back(static_cast<BufferRef>(i));
    Step s;
    s.launch = std::move(l);
    out_.steps.push_back(std::move(s));
  }

  /// An entry running `body` (which reads the flat index `i`) for i in [0, items).
  void perElement(const std::string& comment, int64_t items, const std::string& body, const std::string& prologue = "") {
    std::string code = prologue;
    code += fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; i < {2}; i += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                        idx_, kBlock, c(items));
    code += body + "  }\n";
    entry(comment, code, ceilDiv(items, kBlock));
  }

  /// Writes zero of the result's dtype at `at`.
  std::string zeroAt(const std::string& at) const {
    return fmt::format("kiln_st(&{}[{}], {});", out(), at, literal(outType().dtype, 0));
  }

  // ---- copies ------------------------------------------------------------------------------------

  /// Row o of the result is row o of every operand, one after the other (rows: the dimensions from
  /// the axis on).
  void concat() {
    const ir::TensorType& o = outType();
    auto axis = static_cast<size_t>(ir::normalizeAxis(n_.attrInt("axis"), o.rank()));
    int64_t tail = product(o.shape, axis + 1, o.shape.size()), row = o.shape[axis] * tail;
    std::string body = fmt::format("    const {0} o = i / {1}, col = i % {1};\n", idx_, c(std::max<int64_t>(row, 1)));
    // An if-else chain over the operands that have elements; the last takes the rest of the row.
    std::vector<size_t> parts;
    for (size_t i = 0; i < n_.operands.size(); ++i)
      if (inType(i).shape[axis] * tail > 0) parts.push_back(i);
    int64_t offset = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      int64_t len = inType(parts[p]).shape[axis] * tail;
      std::string copy = fmt::format("{}[i] = {}[o * {} + (col - {})];", out(), in(parts[p]), c(len), c(offset));
      if (p + 1 == parts.size()) body += fmt::format("    {}{}\n", p == 0 ? "" : "else ", copy);
      else body += fmt::format("    {}if (col < {}) {}\n", p == 0 ? "" : "else ", c(offset + len), copy);
      offset += len;
    }
    perElement(fmt::format("concat of {} operands along axis {}", n_.operands.size(), axis), o.numel(), body);
  }

  /// out[o, j, t] = data[o, indices[j], t]; zero for an index outside [0, dim).
  void gather() {
    const ir::TensorType &data = inType(0), &indices = inType(1);
    auto axis = static_cast<size_t>(ir::normalizeAxis(n_.attrInt("axis"), data.rank()));
    int64_t dim = data.shape[axis], inner = product(data.shape, axis + 1, data.shape.size());
    int64_t count = indices.numel();
    std::string body = fmt::format("    const {0} t = i % {1}, r = i / {1}, j = r % {2}, o = r / {2};\n", idx_,
                                   c(std::max<int64_t>(inner, 1)), c(std::max<int64_t>(count, 1)));
    body += fmt::format("    const long long index = kiln_ld({}[j]);\n", in(1));
    body += fmt::format("    if (static_cast<unsigned long long>(index) < {}ull) {}[i] = {}[(o * {} + static_cast<{}>(index)) * {} + t];\n",
                        dim, out(), in(0), c(dim), idx_, c(inner));
    body += "    else " + zeroAt("i") + "\n";
    perElement(fmt::format("gather along axis {}: {} indices into {} rows", axis, count, dim), outType().numel(), body);
  }

  /// slice_grad: dy placed into zeros at starts + c·steps. Each result element finds whether (and
  /// where) the slice took it, dimension by dimension.
  void sliceGrad() {
    const ir::TensorType &dy = inType(0), &o = outType();
    const ir::Ints &starts = n_.attrInts("starts"), &steps = n_.attrInts("steps");
    std::string body = fmt::format("    {} rest = i, src = 0;\n    bool hit = true;\n", idx_);
    int64_t dyStride = 1;
    for (size_t d = o.shape.size(); d-- > 0;) {
      int64_t size = o.shape[d], count = dy.shape[d];
      bool whole = starts[d] == 0 && steps[d] == 1 && count == size;
      if (whole) {
        body += fmt::format("    src += rest % {} * {};\n", c(std::max<int64_t>(size, 1)), c(dyStride));
      } else {
        body += fmt::format("    {{\n      const {0} off = rest % {1} - {2}, q = off / {3};\n", idx_, c(std::max<int64_t>(size, 1)),
                            c(starts[d]), c(steps[d]));
        body += fmt::format("      hit = hit && off == q * {} && q >= 0 && q < {};\n", c(steps[d]), c(count));
        body += fmt::format("      src += q * {};\n    }}\n", c(dyStride));
      }
      body += fmt::format("    rest /= {};\n", c(std::max<int64_t>(size, 1)));
      dyStride *= count;
    }
    body += fmt::format("    if (hit) {}[i] = {}[src];\n    else {}\n", out(), in(0), zeroAt("i"));
    perElement("slice_grad", o.numel(), body);
  }

  // ---- sources and index ops ---------------------------------------------------------------------

  /// out[r, c] = indices[r] == c.
  void oneHot() {
    DType t = outType().dtype;
    int64_t classes = n_.attrInt("num_classes");
    std::string body = fmt::format("    kiln_st(&{}[i], kiln_ld({}[i / {}]) == i % {} ? {} : {});\n", out(), in(0),
                                   c(std::max<int64_t>(classes, 1)), c(std::max<int64_t>(classes, 1)), literal(t, 1),
                                   literal(t, 0));
    perElement(fmt::format("one_hot of {} classes", classes), outType().numel(), body);
  }

  /// Philox draws for element i at the step the operand holds (0 without one).
  void random() {
    DType t = outType().dtype;
    auto seed = static_cast<uint64_t>(n_.attrInt("seed")), offset = static_cast<uint64_t>(n_.attrInt("offset"));
    bool normal = n_.attrStr("dist") == "normal";
    // The step's two's-complement bits are the counter's high word (support/Philox.h).
    std::string prologue =
        n_.operands.empty()
            ? "  const unsigned long long step = 0ull;\n"
            : fmt::format("  const unsigned long long step = static_cast<unsigned long long>(kiln_ld({}[0]));\n", in(0));
    std::string draw = fmt::format("kiln_philox_{}({}ull, {}ull + static_cast<unsigned long long>(i), step)",
                                   normal ? "normal" : "uniform", seed, offset);
    std::string body = fmt::format("    kiln_st(&{}[i], {});\n", out(), convertValue(DType::f32, t, draw));
    perElement(fmt::format("random ({}), seed {}, offset {}", normal ? "normal" : "uniform", seed, offset),
               outType().numel(), body, prologue);
  }

  /// The index of the first maximum (minimum) along the axis, a NaN counting as the extreme.
  void argReduce() {
    const ir::TensorType& x = inType(0);
    bool largest = n_.op == OpKind::ArgMax;
    auto axis = static_cast<size_t>(ir::normalizeAxis(n_.attrInt("axis"), x.rank()));
    int64_t outer = product(x.shape, 0, axis), len = x.shape[axis], inner = product(x.shape, axis + 1, x.shape.size());
    KILN_CHECK(len > 0, "kernel '{}': {} along an empty axis", k_.name, ir::opName(n_.op));
    const char* ct = computeType(x.dtype);
    const char* cmp = largest ? ">" : "<";
    // Whether v (at a later index) replaces best in a scan: the best is not NaN and v is NaN or
    // strictly better.
    std::string takes = isFloat(x.dtype) ? fmt::format("best == best && (v != v || v {} best)", cmp)
                                         : fmt::format("v {} best", cmp);
    std::string what = fmt::format("{} along axis {} of {}", ir::opName(n_.op), axis, ir::shapeStr(x.shape));
    if (inner == 1 && len >= 64) {
      // A warp per row: each lane scans j = lane, lane + 32, … (its first extreme), then lanes
      // combine: a NaN beats a number, a better value beats a worse one, ties go to the lower index.
      std::string better = isFloat(x.dtype)
                               ? fmt::format("ov != ov ? (best == best || oi < bi) : (best == best && (ov {} best || (ov == best && oi < bi)))", cmp)
                               : fmt::format("ov {} best || (ov == best && oi < bi)", cmp);
      std::string code = "  const int lane = threadIdx.x & 31;\n";
      code += fmt::format("  for ({0} r = (static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x) >> 5; r < {2}; r += static_cast<{0}>(gridDim.x) * {3}) {{\n",
                          idx_, kBlock, c(outer), kBlock / 32);
      code += fmt::format("    {} best = 0;\n    long long bi = -1;\n", ct);
      code += fmt::format("    for ({} j = lane; j < {}; j += 32) {{\n", idx_, c(len));
      code += fmt::format("      const {} v = kiln_ld({}[r * {} + j]);\n", ct, in(0), c(len));
      code += fmt::format("      if (bi < 0 || ({})) {{ best = v; bi = j; }}\n    }}\n", takes);
      code += "    for (int off = 16; off > 0; off >>= 1) {\n";
      code += fmt::format("      const {} ov = __shfl_down_sync(0xffffffffu, best, off);\n", ct);
      code += "      const long long oi = __shfl_down_sync(0xffffffffu, bi, off);\n";
      code += fmt::format("      if (oi >= 0 && (bi < 0 || {})) {{ best = ov; bi = oi; }}\n    }}\n", better);
      code += fmt::format("    if (lane == 0) kiln_st(&{}[r], bi);\n  }}\n", out());
      entry(what + " (a warp per row)", code, ceilDiv(outer, kBlock / 32));
      return;
    }
    std::string body = fmt::format("    const {0} first = i / {1} * {2} + i % {1};\n", idx_, c(inner), c(len * inner));
    body += fmt::format("    {} best = kiln_ld({}[first]);\n    long long bi = 0;\n", ct, in(0));
    body += fmt::format("    for ({} j = 1; j < {}; ++j) {{\n", idx_, c(len));
    body += fmt::format("      const {} v = kiln_ld({}[first + j * {}]);\n", ct, in(0), c(inner));
    body += fmt::format("      if ({}) {{ best = v; bi = j; }}\n    }}\n", takes);
    body += fmt::format("    kiln_st(&{}[i], bi);\n", out());
    perElement(what, outer * inner, body);
  }

  /// Zeros of [outer, dim, inner], then out[o, indices[j], t] += updates[o, j, t] in the order of j
  /// (indices outside [0, dim) skipped): each thread sums its element over the staged indices.
  void scatterAdd() {
    const ir::TensorType &indices = inType(0), &updates = inType(1);
    DType t = updates.dtype;
    auto axis = static_cast<size_t>(n_.attrInt("axis"));
    int64_t dim = n_.attrInt("dim_size"), count = indices.numel();
    int64_t inner = product(updates.shape, axis + static_cast<size_t>(indices.rank()), updates.shape.size());
    int64_t total = outType().numel();
    const char* ct = computeType(t);
    std::string code = fmt::format("  __shared__ long long staged[{}];\n", kBlock);
    // The loop bounds are the same for every thread of a block, so all of them reach the barriers.
    code += fmt::format("  for ({0} base = static_cast<{0}>(blockIdx.x) * {1}; base < {2}; base += static_cast<{0}>(gridDim.x) * {1}) {{\n",
                        idx_, kBlock, c(total));
    code += fmt::format("    const {} i = base + threadIdx.x;\n    const bool live = i < {};\n", idx_, c(total));
    code += fmt::format("    const {0} t = i % {1}, r = i / {1}, d = r % {2}, o = r / {2};\n", idx_,
                        c(std::max<int64_t>(inner, 1)), c(std::max<int64_t>(dim, 1)));
    code += fmt::format("    {} sum = {};\n", ct, literal(t, 0));
    code += fmt::format("    for ({} j0 = 0; j0 < {}; j0 += {}) {{\n", idx_, c(count), kBlock);
    code += "      __syncthreads();\n";
    code += fmt::format("      if (j0 + threadIdx.x < {}) staged[threadIdx.x] = kiln_ld({}[j0 + threadIdx.x]);\n", c(count), in(0));
    code += "      __syncthreads();\n";
    code += fmt::format("      const int n = {} - j0 < {} ? static_cast<int>({} - j0) : {};\n", c(count), kBlock, c(count), kBlock);
    code += "      if (live)\n        for (int jj = 0; jj < n; ++jj)\n";
    // f16/bf16 sums stay in f32 (no rounding per add) and round once at the store.
    code += fmt::format("          if (staged[jj] == d) sum = kiln_add(sum, kiln_ld({}[(o * {} + j0 + jj) * {} + t]));\n",
                        in(1), c(count), c(inner));
    code += "    }\n";
    code += fmt::format("    if (live) kiln_st(&{}[i], sum);\n  }}\n", out());
    entry(fmt::format("scatter_add of {} indices into {} rows of {}", count, dim, inner), code, ceilDiv(total, kBlock));
  }

  // ---- pooling -----------------------------------------------------------------------------------

  /// The geometry of a 2-d pooling over NCHW planes (interp/EvalWindow.cpp): window (y, v) covers
  /// input rows y·sh - ph .. y·sh - ph + kh - 1, likewise columns.
  struct Pool {
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
    Pool(const ir::Node& n, const ir::Shape& x, const ir::Shape& y)
        : planes(x[0] * x[1]), h(x[2]), w(x[3]), oh(y[2]), ow(y[3]) {
      const ir::Ints &k = n.attrInts("kernel"), &s = n.attrInts("stride"), &p = n.attrInts("padding");
      kh = spatial(k, 0), kw = spatial(k, 1);
      sh = spatial(s, 0), sw = spatial(s, 1);
      ph = spatial(p, 0), pw = spatial(p, 1);
    }
  };

  /// Declares `names` = the coordinates (plane, row, column) of flat index i over [planes, rows, cols].
  std::string planeCoords(int64_t rows, int64_t cols, const char* p, const char* y, const char* x) const {
    return fmt::format("    const {0} {1} = i % {2}, {3} = i / {2} % {4}, {5} = i / {2} / {4};\n", idx_, x,
                       c(std::max<int64_t>(cols, 1)), y, c(std::max<int64_t>(rows, 1)), p);
  }

  /// max_pool2d (NaN wins, as the canonical NaN) and avg_pool2d (divisor: the padded window's size or
  /// the positions inside the input). A thread per output element.
  void pool() {
    bool isMax = n_.op == OpKind::MaxPool2d;
    bool includePad = !isMax && n_.attrBool("count_include_pad");
    DType t = outType().dtype;
    const char* ct = computeType(t);
    Pool g(n_, inType(0).shape, outType().shape);
    std::string body = planeCoords(g.oh, g.ow, "p", "y", "v");
    body += fmt::format("    const {0} h0 = y * {1} - {2}, w0 = v * {3} - {4};\n", idx_, c(g.sh), c(g.ph), c(g.sw), c(g.pw));
    body += fmt::format("    const auto* plane = {} + p * {};\n", in(0), c(g.h * g.w));
    double inf = std::numeric_limits<double>::infinity();
    body += fmt::format("    {} acc = {};\n", ct, literal(t, isMax ? -inf : 0));
    if (isMax) body += "    bool sawNan = false;\n";
    if (!isMax && !includePad) body += "    int inside = 0;\n";
    body += fmt::format("    for (int a = 0; a < {}; ++a) {{\n", g.kh);
    body += fmt::format("      const {} hh = h0 + a;\n      if (hh < 0 || hh >= {}) continue;\n", idx_, c(g.h));
    body += fmt::format("      for (int b = 0; b < {}; ++b) {{\n", g.kw);
    body += fmt::format("        const {} ww = w0 + b;\n        if (ww < 0 || ww >= {}) continue;\n", idx_, c(g.w));
    body += fmt::format("        const {} e = kiln_ld(plane[hh * {} + ww]);\n", ct, c(g.w));
    if (isMax) body += "        sawNan = sawNan || e != e;\n        if (e > acc) acc = e;\n";
    else body += includePad ? "        acc = kiln_add(acc, e);\n" : "        acc = kiln_add(acc, e);\n        ++inside;\n";
    body += "      }\n    }\n";
    if (isMax) {
      body += fmt::format("    kiln_st(&{}[i], sawNan ? {} : acc);\n", out(), t == DType::f64 ? "kiln_nan()" : "kiln_nanf()");
    } else {
      std::string divisor = includePad ? literal(t == DType::f64 ? DType::f64 : DType::f32, static_cast<double>(g.kh * g.kw))
                                       : fmt::format("static_cast<{}>(inside)", ct);
      body += fmt::format("    kiln_st(&{}[i], kiln_div(acc, {}));\n", out(), divisor);
    }
    perElement(fmt::format("{} {}x{} stride {}x{} padding {}x{}", ir::opName(n_.op), g.kh, g.kw, g.sh, g.sw, g.ph, g.pw),
               outType().numel(), body);
  }

  /// Declares [lo, hi): the windows along one dimension that cover input coordinate `x`.
  std::string covering(const char* lo, const char* hi, const char* x, int64_t stride, int64_t pad, int64_t kernel,
                       int64_t windows) const {
    // Window u covers x when u·stride - pad <= x <= u·stride - pad + kernel - 1.
    return fmt::format("    const {0} {1}a = {2} + {3};\n"
                       "    const {0} {1} = {1}a > 0 ? ({1}a + {4}) / {5} : 0;\n"
                       "    const {0} {6} = ({2} + {7}) / {5} + 1 < {8} ? ({2} + {7}) / {5} + 1 : {8};\n",
                       idx_, lo, x, c(pad - kernel + 1), c(stride - 1), c(stride), hi, c(pad), c(windows));
  }

  /// max_pool2d_grad: each window's dy goes to its first maximum (a NaN counting as the maximum);
  /// a thread per dx element adds, in window order, the dy of the covering windows that chose it.
  void maxPoolGrad() {
    DType t = outType().dtype;
    const char* ct = computeType(t);
    Pool g(n_, inType(0).shape, inType(1).shape);
    std::string body = planeCoords(g.h, g.w, "p", "xh", "xw");
    body += covering("y0", "y1", "xh", g.sh, g.ph, g.kh, g.oh);
    body += covering("v0", "v1", "xw", g.sw, g.pw, g.kw, g.ow);
    body += fmt::format("    const auto* plane = {} + p * {};\n", in(0), c(g.h * g.w));
    body += fmt::format("    const {} self = xh * {} + xw;\n", idx_, c(g.w));
    body += fmt::format("    {} sum = {};\n", ct, literal(t, 0));
    body += fmt::format("    for ({} y = y0; y < y1; ++y)\n      for ({} v = v0; v < v1; ++v) {{\n", idx_, idx_);
    body += fmt::format("        {} best = -1;\n        {} top = 0;\n", idx_, ct);
    body += fmt::format("        for (int a = 0; a < {}; ++a) {{\n", g.kh);
    body += fmt::format("          const {} hh = y * {} - {} + a;\n          if (hh < 0 || hh >= {}) continue;\n", idx_,
                        c(g.sh), c(g.ph), c(g.h));
    body += fmt::format("          for (int b = 0; b < {}; ++b) {{\n", g.kw);
    body += fmt::format("            const {} ww = v * {} - {} + b;\n            if (ww < 0 || ww >= {}) continue;\n", idx_,
                        c(g.sw), c(g.pw), c(g.w));
    body += fmt::format("            const {} e = kiln_ld(plane[hh * {} + ww]);\n", ct, c(g.w));
    body += fmt::format("            if (best < 0 || (top == top && (e != e || e > top))) {{ best = hh * {} + ww; top = e; }}\n", c(g.w));
    body += "          }\n        }\n";
    body += fmt::format("        if (best == self) sum = kiln_add(sum, kiln_ld({}[(p * {} + y) * {} + v]));\n      }}\n", in(1),
                        c(g.oh), c(g.ow));
    body += fmt::format("    kiln_st(&{}[i], sum);\n", out());
    perElement(fmt::format("max_pool2d_grad {}x{} stride {}x{} padding {}x{}", g.kh, g.kw, g.sh, g.sw, g.ph, g.pw),
               outType().numel(), body);
  }

  /// avg_pool2d_grad: a thread per dx element sums dy / divisor of the windows covering it, in
  /// window order.
  void avgPoolGrad() {
    DType t = outType().dtype;
    const char* ct = computeType(t);
    bool includePad = n_.attrBool("count_include_pad");
    Pool g(n_, outType().shape, inType(0).shape);
    std::string body = planeCoords(g.h, g.w, "p", "xh", "xw");
    body += covering("y0", "y1", "xh", g.sh, g.ph, g.kh, g.oh);
    body += covering("v0", "v1", "xw", g.sw, g.pw, g.kw, g.ow);
    body += fmt::format("    {} sum = {};\n", ct, literal(t, 0));
    body += fmt::format("    for ({} y = y0; y < y1; ++y) {{\n", idx_);
    // Positions of a window inside the input along one dimension: min(k, size - first) - max(0, -first).
    auto inside = [&](const char* u, int64_t stride, int64_t pad, int64_t kernel, int64_t size) {
      return fmt::format("(({0} * {1} - {2} + {3} < {4} ? {3} : {4} - ({0} * {1} - {2})) - ({0} * {1} - {2} < 0 ? {2} - {0} * {1} : 0))",
                         u, c(stride), c(pad), c(kernel), c(size));
    };
    if (!includePad) body += fmt::format("      const {} rows = {};\n", idx_, inside("y", g.sh, g.ph, g.kh, g.h));
    body += fmt::format("      for ({} v = v0; v < v1; ++v) {{\n", idx_);
    std::string divisor = includePad ? std::to_string(g.kh * g.kw) : "rows * " + inside("v", g.sw, g.pw, g.kw, g.w);
    body += fmt::format("        const {0} dy = kiln_ld({1}[(p * {2} + y) * {3} + v]);\n", ct, in(0), c(g.oh), c(g.ow));
    body += fmt::format("        sum = kiln_add(sum, kiln_div(dy, static_cast<{}>({})));\n      }}\n    }}\n", ct, divisor);
    body += fmt::format("    kiln_st(&{}[i], sum);\n", out());
    perElement(fmt::format("avg_pool2d_grad {}x{} stride {}x{} padding {}x{}", g.kh, g.kw, g.sh, g.sw, g.ph, g.pw),
               outType().numel(), body);
  }

  const kernels::Kernel& k_;
  const ir::Node& n_;
  std::string name_;
  const char* idx_ = "int";
  RenderedKernel out_;
};

}  // namespace

RenderedKernel renderOpKernel(const kernels::Kernel& k, const RenderOptions&) {
  KILN_CHECK(k.op, "kernel '{}' is not an op kernel", k.name);
  return OpRenderer(k).render();
}

}  // namespace kiln::cuda
