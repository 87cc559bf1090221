// The pooling op kernels (OpEmitter.h): max_pool2d, avg_pool2d and their gradients over NCHW
// planes, with the interpreter's window geometry (interp/EvalWindow.cpp, EvalGrad.cpp).
//
// Lanes run along consecutive output columns of one output row whose windows lie inside the input
// ("interior" windows): a window row of N stride-s windows is one wide load of (N-1)·s + k elements
// split into its k taps by shuffles (stride 1: k overlapping loads), and the gradients store such a
// row back the same way. Windows that touch the padding take a scalar path with bounds; rows
// shorter than the ISA's vectors use narrower ones.
//
//   forward        one item per output row. Max: select(x > acc) per tap (vmaxps) with a NaN flag,
//                  the canonical quiet NaN where a window holds a NaN; avg: a sum divided by the
//                  padded window's size or by its positions inside the input.
//   grads without overlap (stride >= kernel): every dx element gets at most one value, so one item
//                  per output row zeroes the band of dx rows it owns (unless its windows tile the
//                  band) and stores each window row of N windows as one vector: dy at the first
//                  maximum (max), the window's share (avg).
//   grads with overlap: max adds dy per plane in window order (maxima found N windows at a time),
//                  in f32 scratch for f16/bf16; avg sums for each dx element the shares of the
//                  windows that cover it, one item per dx row.
#include "codegen/cpu/OpEmitter.h"

#include "codegen/cpu/Elements.h"

#include <limits>

namespace kiln::cpu::opkernels {
namespace {

/// An attribute with one value per spatial dimension, or one for both.
int64_t spatial(const ir::Ints& v, size_t i) { return v.size() == 1 ? v[0] : v.at(i); }

/// The windows of a 2-d pooling over NCHW planes (interp/EvalWindow.cpp): window (y, v) covers
/// input rows y·sh - ph .. y·sh - ph + kh - 1, likewise columns.
struct PoolGeometry {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;

  PoolGeometry(const ir::Node& n, const ir::Shape& x, const ir::Shape& y)
      : planes(x[0] * x[1]), h(x[2]), w(x[3]), oh(y[2]), ow(y[3]) {
    const ir::Ints &k = n.attrInts("kernel"), &s = n.attrInts("stride"), &p = n.attrInts("padding");
    kh = spatial(k, 0), kw = spatial(k, 1);
    sh = spatial(s, 0), sw = spatial(s, 1);
    ph = spatial(p, 0), pw = spatial(p, 1);
  }

  /// Output columns whose windows lie inside the input: [first, last).
  std::pair<int64_t, int64_t> interiorColumns() const {
    int64_t first = std::min((pw + sw - 1) / sw, ow);
    int64_t last = w - kw + pw < 0 ? 0 : std::min((w - kw + pw) / sw + 1, ow);
    return {first, std::max(first, last)};
  }

  /// Whether `lanes` consecutive interior windows are cheap to load as one vector per window row.
  bool vectorRows(int lanes) const { return (lanes - 1) * sw + kw <= 4 * lanes; }
};

/// The taps of window `index` (its first input element) along one dimension: the first input
/// coordinate and the range [lo, hi) of offsets inside the input.
struct Span {
  Value* first;
  Value* lo;
  Value* hi;
};

Span windowSpan(OpEmitter& e, Value* index, int64_t stride, int64_t pad, int64_t kernel, int64_t size) {
  Value* first = e.add(e.mul(index, stride), -pad);
  Value* zero = e.i64(0);
  return {first, e.max(zero, e.sub(zero, first)), e.min(e.i64(kernel), e.sub(e.i64(size), first))};
}

/// windowSpan for the rows of output row y; constant offsets [0, kh) when no window of any output
/// row reaches into the padding, so that the loops over window rows unroll.
Span rowSpan(OpEmitter& e, const PoolGeometry& g, Value* y) {
  Span s = windowSpan(e, y, g.sh, g.ph, g.kh, g.h);
  if (g.ph == 0 && (g.oh - 1) * g.sh + g.kh <= g.h) s.lo = e.i64(0), s.hi = e.i64(g.kh);
  return s;
}

/// The kw taps of `lanes` consecutive windows in one input row starting at element `index`, as
/// stored: tap j of lane l is element index + l·sw + j.
std::vector<Value*> loadTaps(OpEmitter& e, Value* base, DType t, Value* index, int lanes, int64_t sw, int64_t kw) {
  std::vector<Value*> taps;
  if (sw == 1) {
    for (int64_t j = 0; j < kw; ++j) taps.push_back(e.loadRaw(base, t, e.add(index, j), lanes));
    return taps;
  }
  Value* row = e.loadRaw(base, t, index, static_cast<int>((lanes - 1) * sw + kw));
  for (int64_t j = 0; j < kw; ++j) {
    std::vector<int> mask;
    for (int l = 0; l < lanes; ++l) mask.push_back(static_cast<int>(j + l * sw));
    taps.push_back(e.b.CreateShuffleVector(row, mask));
  }
  return taps;
}

/// The inverse of loadTaps for windows that do not overlap (kw <= sw): stores each lane's kw taps
/// at index + l·sw + j, zeros in the gaps between windows, as one vector of (lanes-1)·sw + kw.
void storeTaps(OpEmitter& e, Value* base, DType t, Value* index, std::vector<Value*> taps, int64_t sw) {
  int lanes = lanesOf(taps[0]);
  auto kw = static_cast<int64_t>(taps.size());
  while (static_cast<int64_t>(taps.size()) < sw) taps.push_back(llvm::Constant::getNullValue(taps[0]->getType()));
  // Concatenate the pieces (pairwise, padded to a power of two), then interleave them.
  while (taps.size() & (taps.size() - 1)) taps.push_back(llvm::Constant::getNullValue(taps[0]->getType()));
  while (taps.size() > 1) {
    std::vector<Value*> halves;
    for (size_t i = 0; i < taps.size(); i += 2) {
      std::vector<int> mask(static_cast<size_t>(2 * lanesOf(taps[i])));
      for (size_t q = 0; q < mask.size(); ++q) mask[q] = static_cast<int>(q);
      halves.push_back(e.b.CreateShuffleVector(taps[i], taps[i + 1], mask));
    }
    taps = std::move(halves);
  }
  std::vector<int> mask;
  for (int64_t q = 0; q < (lanes - 1) * sw + kw; ++q) mask.push_back(static_cast<int>((q % sw) * lanes + q / sw));
  e.storeRaw(base, t, index, e.b.CreateShuffleVector(taps[0], mask));
}

/// The lanes forWindows gives a group of interior windows (narrower for short rows), or 1 when
/// every window of a row goes alone.
int windowLanes(const PoolGeometry& g, int lanes) {
  auto [v0, v1] = g.interiorColumns();
  while (lanes > 4 && v1 - v0 < lanes) lanes /= 2;
  return lanes == 1 || v1 - v0 < lanes || !g.vectorRows(lanes) ? 1 : lanes;
}

/// Whether, without overlap, the stores of every output row's windows cover its band of dx rows
/// (zeroBand's) entirely, so that the band needs no zeroing first: windows that tile the input
/// exactly (stride = kernel, no padding, nothing left over) in groups of whole vectors.
bool windowsTileBands(const PoolGeometry& g, int lanes) {
  return g.sh == g.kh && g.sw == g.kw && g.ph == 0 && g.pw == 0 && g.oh * g.sh == g.h && g.ow * g.sw == g.w &&
         windowLanes(g, lanes) > 1;
}

/// Calls window(v, n) for the windows of one output row, v = 0 .. ow-1: interior windows (every
/// column inside the input) in groups of n = `lanes` consecutive ones, narrower vectors for short
/// rows, and the others with n = 1. When `repeatable` (a window's stores do not depend on earlier
/// ones), the interior's last partial group is a full group shifted back, recomputing a few
/// windows, instead of scalar windows.
void forWindows(OpEmitter& e, const PoolGeometry& g, int lanes, bool repeatable,
                const std::function<void(Value*, int)>& window) {
  auto [v0, v1] = g.interiorColumns();
  lanes = windowLanes(g, lanes);
  if (lanes == 1) v0 = v1 = g.ow;
  auto one = [&](Value* v, const Carried&) {
    window(v, 1);
    return Carried{};
  };
  e.loop(e.i64(0), e.i64(v0), 1, {}, one);
  int64_t vectorEnd = v0 + (v1 - v0) / lanes * lanes;
  e.loop(e.i64(v0), e.i64(vectorEnd), lanes, {}, [&](Value* v, const Carried&) {
    window(v, lanes);
    return Carried{};
  }, Unroll::Allowed);
  if (repeatable && vectorEnd < v1) {
    window(e.i64(v1 - lanes), lanes);
    vectorEnd = v1;
  }
  e.loop(e.i64(vectorEnd), e.i64(g.ow), 1, {}, one);
}

/// Zeroes the dx rows that output row y owns where windows do not overlap: from its windows'
/// first row to the next output row's (the last output row: through the end of the plane).
/// Nothing where the windows' own stores cover the band (windowsTileBands).
void zeroBand(OpEmitter& e, const PoolGeometry& g, DType t, Value* plane, Value* y, const Span& rows) {
  if (windowsTileBands(g, e.lanesFor(t))) return;
  Value* first = e.max(e.i64(0), rows.first);
  Value* next = e.min(e.i64(g.h), e.add(rows.first, g.sh));
  Value* last = e.b.CreateSelect(e.b.CreateICmpEQ(y, e.i64(g.oh - 1)), e.i64(g.h), next);
  e.zeroShort(e.out(), t, e.add(plane, e.mul(first, g.w)), e.mul(e.sub(last, first), g.w));
}

/// Whether x replaces the best so far in max_pool2d_grad's scan: nothing chosen yet, or the best
/// is not NaN and x is NaN or larger.
Value* replacesBest(llvm::IRBuilderBase& b, Value* none, Value* x, Value* best) {
  return b.CreateOr(none, b.CreateAnd(b.CreateFCmpORD(best, best), b.CreateFCmpUGT(x, best)));
}

}  // namespace

bool poolWindowsOverlap(const ir::Node& n) {
  const ir::Ints &k = n.attrInts("kernel"), &s = n.attrInts("stride");
  return spatial(s, 0) < spatial(k, 0) || spatial(s, 1) < spatial(k, 1);
}

/// max_pool2d (NaN wins, written as the canonical quiet NaN) and avg_pool2d (the padded window's
/// size or the count of inside positions as divisor). One item per output row.
llvm::Function* emitPool(OpEmitter& e) {
  const ir::Node& node = e.node();
  bool isMax = node.op == ir::OpKind::MaxPool2d;
  bool includePad = !isMax && node.attrBool("count_include_pad");
  DType t = e.outType().dtype;
  PoolGeometry g(node, e.inType(0).shape, e.outType().shape);
  return e.emit(g.planes * g.oh, g.ow * g.kh * g.kw, false, [&](Value* begin, Value* end) {
    auto& b = e.b;
    e.loop(begin, end, [&](Value* item) {
      Value* plane = e.mul(e.div(item, g.oh), g.h * g.w);
      Span rows = rowSpan(e, g, e.rem(item, g.oh));
      // Element (i, j) of window v's first row lies at rowStart + i·w + (first column) + j.
      Value* rowStart = e.add(plane, e.mul(rows.first, g.w));
      auto window = [&](Value* v, int n) {
        Carried init = {constant(b, t, isMax ? -std::numeric_limits<double>::infinity() : 0, n),
                        splat(b, b.getFalse(), n)};
        auto combine = [&](Carried acc, Value* x) {
          if (!isMax) return Carried{b.CreateFAdd(acc[0], x), acc[1]};
          return Carried{b.CreateSelect(b.CreateFCmpOGT(x, acc[0]), x, acc[0]),
                         b.CreateOr(acc[1], b.CreateFCmpUNO(x, x))};
        };
        Carried acc;
        Value* count;
        if (n > 1) {  // interior windows: every column inside
          Value* col = e.add(e.mul(v, g.sw), -g.pw);
          acc = e.loop(rows.lo, rows.hi, 1, init, [&](Value* i, const Carried& a) {
            Carried next = a;
            for (Value* tap : loadTaps(e, e.in(0), t, e.add(rowStart, e.add(e.mul(i, g.w), col)), n, g.sw, g.kw))
              next = combine(next, fromStorage(b, t, tap));
            return next;
          }, Unroll::Allowed);
          count = e.mul(e.sub(rows.hi, rows.lo), g.kw);
        } else {
          Span cols = windowSpan(e, v, g.sw, g.pw, g.kw, g.w);
          acc = e.loop(rows.lo, rows.hi, 1, init, [&](Value* i, const Carried& a) {
            Value* at = e.add(rowStart, e.add(e.mul(i, g.w), cols.first));
            return e.loop(cols.lo, cols.hi, 1, a, [&](Value* j, const Carried& a2) {
              return combine(a2, e.load(e.in(0), t, e.add(at, j)));
            });
          });
          count = e.mul(e.sub(rows.hi, rows.lo), e.sub(cols.hi, cols.lo));
        }
        llvm::Type* ct = withLanes(computeType(b, t), n);
        Value* result;
        if (isMax) {
          result = b.CreateSelect(acc[1], llvm::ConstantFP::getNaN(ct), acc[0]);
        } else {
          Value* divisor = includePad ? e.i64(g.kh * g.kw) : count;
          result = roundTo(b, t, b.CreateFDiv(acc[0], splat(b, b.CreateSIToFP(divisor, computeType(b, t)), n)));
        }
        e.store(e.out(), t, e.add(e.mul(item, g.ow), v), result);
      };
      forWindows(e, g, e.lanesFor(t), true, window);
    });
  });
}

/// max_pool2d_grad: each window's dy goes to its first maximum. Without overlap (stride >= kernel)
/// every dx element gets at most one value, so each output row zeroes its band of dx rows and
/// stores dy there, the interior windows' rows as whole vectors; overlapping windows add up per
/// plane in window order (in f32 scratch for f16/bf16), the interior windows' maxima found lanes
/// at a time.
llvm::Function* emitMaxPoolGrad(OpEmitter& e) {
  DType t = e.outType().dtype, acc = sumType(t);
  PoolGeometry g(e.node(), e.inType(0).shape, e.inType(1).shape);
  auto& b = e.b;
  // The first maximum of window (rows, v) as an index into its plane, -1 for an empty window.
  auto argmax = [&](Value* plane, const Span& rows, Value* v) {
    Span cols = windowSpan(e, v, g.sw, g.pw, g.kw, g.w);
    Carried none = {e.i64(-1), constant(b, t, 0, 1)};
    Carried best = e.loop(rows.lo, rows.hi, 1, none, [&](Value* i, const Carried& a) {
      Value* rowAt = e.add(e.mul(e.add(rows.first, i), g.w), cols.first);
      return e.loop(cols.lo, cols.hi, 1, a, [&](Value* j, const Carried& a2) {
        Value* at = e.add(rowAt, j);
        Value* x = e.load(e.in(0), t, e.add(plane, at));
        Value* take = replacesBest(b, b.CreateICmpSLT(a2[0], e.i64(0)), x, a2[1]);
        return Carried{b.CreateSelect(take, at, a2[0]), b.CreateSelect(take, x, a2[1])};
      });
    });
    return best[0];
  };
  // The first maxima of n interior windows from column `col` on: each lane's tap i·kw + j, or -1.
  auto argmaxLanes = [&](Value* plane, const Span& rows, Value* col, int n) {
    llvm::Type* taps32 = withLanes(b.getInt32Ty(), n);
    Carried none = {llvm::ConstantInt::get(taps32, -1, true), constant(b, t, 0, n)};
    return e.loop(rows.lo, rows.hi, 1, none, [&](Value* i, const Carried& a) {
      Carried next = a;
      Value* tap0 = b.CreateTrunc(e.mul(i, g.kw), b.getInt32Ty());
      Value* at = e.add(plane, e.add(e.mul(e.add(rows.first, i), g.w), col));
      std::vector<Value*> taps = loadTaps(e, e.in(0), t, at, n, g.sw, g.kw);
      for (int64_t j = 0; j < g.kw; ++j) {
        Value* x = fromStorage(b, t, taps[static_cast<size_t>(j)]);
        Value* take = replacesBest(b, b.CreateICmpSLT(next[0], llvm::Constant::getNullValue(taps32)), x, next[1]);
        Value* tap = splat(b, b.CreateAdd(tap0, b.getInt32(static_cast<uint32_t>(j))), n);
        next = {b.CreateSelect(take, tap, next[0]), b.CreateSelect(take, x, next[1])};
      }
      return next;
    }, Unroll::Allowed)[0];
  };
  // sums[plane + best] += dy, for sums of type `st`.
  auto addAt = [&](Value* sums, DType st, Value* plane, Value* best, Value* dy) {
    e.when(b.CreateICmpSGE(best, e.i64(0)), [&] {
      Value* at = e.add(plane, best);
      e.store(sums, st, at, addIn(b, st, e.load(sums, st, at), convert(b, t, st, dy)));
    });
  };

  if (poolWindowsOverlap(e.node())) {
    int64_t size = g.h * g.w;
    return e.emit(g.planes, size + g.oh * g.ow * g.kh * g.kw, acc != t, [&](Value* begin, Value* end) {
      Value* sums = acc == t ? e.out() : e.scratch();
      e.loop(begin, end, [&](Value* p) {
        Value* plane = e.mul(p, size);
        e.zero(sums, acc, plane, e.i64(size));
        e.loop(e.i64(0), e.i64(g.oh), [&](Value* y) {
          Span rows = rowSpan(e, g, y);
          Value* dyRow = e.mul(e.add(e.mul(p, g.oh), y), g.ow);
          forWindows(e, g, e.lanesFor(t), false, [&](Value* v, int n) {
            Value* dy = e.load(e.in(1), t, e.add(dyRow, v), n);
            if (n == 1) return addAt(sums, acc, plane, argmax(plane, rows, v), dy);
            // Add lane by lane, in window order.
            Value* col = e.add(e.mul(v, g.sw), -g.pw);
            Value* best = argmaxLanes(plane, rows, col, n);
            for (int l = 0; l < n; ++l) {
              Value* tap = b.CreateSExt(b.CreateExtractElement(best, l), b.getInt64Ty());
              Value* i = e.div(tap, g.kw);
              Value* j = e.sub(tap, e.mul(i, g.kw));
              Value* at = e.add(e.mul(e.add(rows.first, i), g.w), e.add(e.add(col, l * g.sw), j));
              addAt(sums, acc, plane, b.CreateSelect(b.CreateICmpSGE(tap, e.i64(0)), at, e.i64(-1)),
                    b.CreateExtractElement(dy, l));
            }
          });
        });
        if (acc != t)
          e.forLanes(plane, e.add(plane, size), e.lanesFor(t), [&](Value* i, int n) {
            e.store(e.out(), t, i, convert(b, acc, t, e.load(sums, acc, i, n)));
          }, Unroll::Allowed);
      });
    });
  }

  return e.emit(g.planes * g.oh, g.ow * g.kh * g.kw + g.sh * g.w, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* item) {
      Value* y = e.rem(item, g.oh);
      Value* plane = e.mul(e.div(item, g.oh), g.h * g.w);
      Span rows = rowSpan(e, g, y);
      zeroBand(e, g, t, plane, y, rows);
      Value* dyRow = e.mul(item, g.ow);
      forWindows(e, g, e.lanesFor(t), true, [&](Value* v, int n) {
        if (n == 1) return addAt(e.out(), t, plane, argmax(plane, rows, v), e.load(e.in(1), t, e.add(dyRow, v)));
        Value* col = e.add(e.mul(v, g.sw), -g.pw);
        Value* best = argmaxLanes(plane, rows, col, n);
        // 0 + dy, as the interpreter's sum into zeros gives (-0 becomes +0).
        Value* zero = constant(b, t, 0, n);
        Value* dy = b.CreateFAdd(e.load(e.in(1), t, e.add(dyRow, v), n), zero);
        e.loop(rows.lo, rows.hi, 1, {}, [&](Value* i, const Carried&) {
          Value* tap0 = b.CreateTrunc(e.mul(i, g.kw), b.getInt32Ty());
          std::vector<Value*> values;
          for (int64_t j = 0; j < g.kw; ++j) {
            Value* here = b.CreateICmpEQ(best, splat(b, b.CreateAdd(tap0, b.getInt32(static_cast<uint32_t>(j))), n));
            values.push_back(toStorage(b, t, b.CreateSelect(here, dy, zero)));
          }
          storeTaps(e, e.out(), t, e.add(plane, e.add(e.mul(e.add(rows.first, i), g.w), col)), values, g.sw);
          return Carried{};
        }, Unroll::Allowed);
      });
    });
  });
}

/// avg_pool2d_grad: each window's dy / divisor added to every input position of the window.
/// Without overlap each dx element gets at most one share, stored like max_pool2d_grad's dy (one
/// item per output row, interior window rows as whole vectors); with overlap each dx element sums
/// the shares of the windows that cover it, in window order, one item per dx row.
llvm::Function* emitAvgPoolGrad(OpEmitter& e) {
  DType t = e.outType().dtype, acc = sumType(t);
  PoolGeometry g(e.node(), e.outType().shape, e.inType(0).shape);
  bool includePad = e.node().attrBool("count_include_pad");
  auto& b = e.b;
  // dy / divisor in the accumulator type, for windows with `inside` positions in the input.
  auto share = [&](Value* dy, Value* inside) {
    Value* divisor = includePad ? e.i64(g.kh * g.kw) : inside;
    Value* d = splat(b, b.CreateSIToFP(divisor, computeType(b, acc)), lanesOf(dy));
    return b.CreateFDiv(convert(b, t, acc, dy), d);
  };

  if (!poolWindowsOverlap(e.node())) {
    return e.emit(g.planes * g.oh, g.ow * g.kh * g.kw + g.sh * g.w, false, [&](Value* begin, Value* end) {
      e.loop(begin, end, [&](Value* item) {
        Value* y = e.rem(item, g.oh);
        Value* plane = e.mul(e.div(item, g.oh), g.h * g.w);
        Span rows = rowSpan(e, g, y);
        zeroBand(e, g, t, plane, y, rows);
        Value* dyRow = e.mul(item, g.ow);
        Value* rowsInside = e.sub(rows.hi, rows.lo);
        forWindows(e, g, e.lanesFor(t), true, [&](Value* v, int n) {
          Value* col = e.add(e.mul(v, g.sw), -g.pw);
          Span cols = n == 1 ? windowSpan(e, v, g.sw, g.pw, g.kw, g.w) : Span{col, e.i64(0), e.i64(g.kw)};
          Value* x = share(e.load(e.in(0), t, e.add(dyRow, v), n), e.mul(rowsInside, e.sub(cols.hi, cols.lo)));
          // 0 + share, as the interpreter's sum into zeros gives (-0 becomes +0).
          Value* value = toStorage(b, t, convert(b, acc, t, b.CreateFAdd(x, constant(b, acc, 0, n))));
          e.loop(rows.lo, rows.hi, 1, {}, [&](Value* i, const Carried&) {
            Value* rowAt = e.add(plane, e.add(e.mul(e.add(rows.first, i), g.w), cols.first));
            if (n > 1) {
              storeTaps(e, e.out(), t, rowAt, std::vector<Value*>(static_cast<size_t>(g.kw), value), g.sw);
            } else {
              e.loop(cols.lo, cols.hi, [&](Value* j) { e.storeRaw(e.out(), t, e.add(rowAt, j), value); });
            }
            return Carried{};
          }, Unroll::Allowed);
        });
      });
    });
  }

  // The windows along one dimension that cover input coordinate `x`: [lo, hi).
  auto covering = [&](Value* x, int64_t stride, int64_t pad, int64_t kernel, int64_t windows) {
    Value* after = e.add(x, pad - kernel + 1);  // windows start at or after ceil(after / stride)
    Value* lo = b.CreateSelect(b.CreateICmpSGT(after, e.i64(0)), e.div(e.add(after, stride - 1), stride), e.i64(0));
    Value* hi = e.min(e.i64(windows), e.add(e.div(e.add(x, pad), stride), 1));
    return std::pair{lo, hi};
  };
  // How many of window `index`'s positions along one dimension lie inside the input.
  auto inside = [&](Value* index, int64_t stride, int64_t pad, int64_t kernel, int64_t size) {
    Span s = windowSpan(e, index, stride, pad, kernel, size);
    return e.sub(s.hi, s.lo);
  };
  int64_t perElement = ((g.kh + g.sh - 1) / g.sh) * ((g.kw + g.sw - 1) / g.sw);
  return e.emit(g.planes * g.h, g.w * perElement, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* item) {
      Value* p = e.div(item, g.h);
      auto [ylo, yhi] = covering(e.rem(item, g.h), g.sh, g.ph, g.kh, g.oh);
      e.loop(e.i64(0), e.i64(g.w), [&](Value* x) {
        auto [vlo, vhi] = covering(x, g.sw, g.pw, g.kw, g.ow);
        Carried sum = e.loop(ylo, yhi, 1, {constant(b, acc, 0, 1)}, [&](Value* y, const Carried& a) {
          Value* dyRow = e.mul(e.add(e.mul(p, g.oh), y), g.ow);
          Value* rowsInside = inside(y, g.sh, g.ph, g.kh, g.h);
          return e.loop(vlo, vhi, 1, a, [&](Value* v, const Carried& a2) {
            Value* count = e.mul(rowsInside, inside(v, g.sw, g.pw, g.kw, g.w));
            return Carried{b.CreateFAdd(a2[0], share(e.load(e.in(0), t, e.add(dyRow, v)), count))};
          }, Unroll::Allowed);
        }, Unroll::Allowed);
        e.store(e.out(), t, e.add(e.mul(item, g.w), x), convert(b, acc, t, sum[0]));
      });
    });
  });
}

}  // namespace kiln::cpu::opkernels
