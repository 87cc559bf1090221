#include "RandomGraphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace kiln::testing {
namespace {

using ir::Ints;
using ir::OpKind;
using ir::Shape;
using ir::Value;

constexpr int64_t kMaxRank = 4;

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  int64_t below(int64_t n) { return static_cast<int64_t>(bits() % static_cast<uint64_t>(n)); }
  bool chance(int64_t percent) { return below(100) < percent; }
  template <typename T>
  const T& of(const std::vector<T>& items) {
    return items[static_cast<size_t>(below(static_cast<int64_t>(items.size())))];
  }

 private:
  uint64_t state_;
};

Ints swapLastTwo(int64_t rank) {
  Ints perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

class Walk {
 public:
  Walk(uint64_t seed, const RandomGraphOptions& o) : rng_(seed), o_(o), g_(fmt::format("random_{}", seed)) {}

  ir::Graph run() {
    int64_t inputs = 1 + rng_.below(3);
    for (int64_t i = 0; i < inputs; ++i) pool_.push_back(input(shape(1 + rng_.below(o_.maxRank))));
    if (rng_.chance(25)) {
      ir::Initializer init{ir::Initializer::Kind::Uniform, -1, 1, rng_.bits() >> 12};
      pool_.push_back(g_.addParam("p0", {DType::f32, shape(1 + rng_.below(o_.maxRank))}, init));
    }
    for (int i = 0; i < o_.steps; ++i) step();
    addOutputs();
    return std::move(g_);
  }

 private:
  Value* op(OpKind k, std::vector<Value*> operands, std::vector<ir::NamedAttr> attrs = {}) {
    return g_.addNode(k, std::move(operands), attrs);
  }
  Value* input(const Shape& s) { return g_.addInput(fmt::format("x{}", inputCount_++), {DType::f32, s}); }

  int64_t dim() { return rng_.chance(33) ? 1 : 1 + rng_.below(o_.maxDim); }
  Shape shape(int64_t rank) {
    Shape s;
    for (int64_t i = 0; i < rank; ++i) s.push_back(dim());
    return s;
  }

  /// A pool value, more often a recent one (so the walk builds chains).
  Value* pick() {
    auto n = static_cast<int64_t>(pool_.size());
    int64_t i = rng_.chance(60) ? n - 1 - rng_.below(std::min<int64_t>(n, 3)) : rng_.below(n);
    return pool_[static_cast<size_t>(i)];
  }
  Value* pickWithRank(int64_t minRank) {
    std::vector<Value*> ok;
    for (Value* v : pool_)
      if (v->type.rank() >= minRank) ok.push_back(v);
    return ok.empty() ? nullptr : rng_.of(ok);
  }

  /// Mostly the values the simplifications look for; quarter-steps keep literals exact in f32.
  double scalar() {
    static const std::vector<double> special = {1, 1, 0, -0.0, 2, 0.5, -1};
    if (rng_.chance(60)) return rng_.of(special);
    return static_cast<double>(rng_.below(17) - 8) / 4;
  }
  Value* constant(const Shape& s, DType t = DType::f32) {
    ir::Floats values;
    if (rng_.chance(50) || ir::numElements(s) == 0) {
      values.push_back(scalar());
    } else {
      for (int64_t i = 0; i < ir::numElements(s); ++i) values.push_back(scalar());
    }
    return op(OpKind::Constant, {}, {{"shape", s}, {"dtype", t}, {"value", values}});
  }

  /// A shape that broadcasts with `s`: a suffix of it with some dimensions set to 1, or a scalar.
  Shape compatible(const Shape& s) {
    if (rng_.chance(30)) return {};
    Shape out(s.begin() + rng_.below(static_cast<int64_t>(s.size()) + 1), s.end());
    for (int64_t& d : out)
      if (rng_.chance(30)) d = 1;
    return out;
  }
  /// A second operand for `a`: `a` itself, a pool value that broadcasts with it, or a constant.
  Value* partner(Value* a) {
    if (rng_.chance(10)) return a;
    if (rng_.chance(35)) {
      std::vector<Value*> ok;
      for (Value* v : pool_) {
        Shape out;
        if (v != a && ir::broadcastShapes(a->type.shape, v->type.shape, out) &&
            static_cast<int64_t>(out.size()) <= kMaxRank)
          ok.push_back(v);
      }
      if (!ok.empty()) return rng_.of(ok);
    }
    return constant(compatible(a->type.shape));
  }

  void step() {
    switch (rng_.below(12)) {
      case 0: unary(); break;
      case 1:
      case 2: binary(); break;
      case 3: castRoundTrip(); break;
      case 4: reduce(); break;
      case 5: reshape(); break;
      case 6: broadcast(); break;
      case 7: permute(); break;
      case 8: slice(); break;
      case 9: matmul(); break;
      case 10: repeat(); break;
      default: foldable(); break;
    }
  }

  void unary() {
    static const std::vector<OpKind> ops = {OpKind::Neg,  OpKind::Abs,     OpKind::Exp,   OpKind::Tanh,
                                            OpKind::Relu, OpKind::Sigmoid, OpKind::Sin,   OpKind::Floor,
                                            OpKind::Sqrt, OpKind::Log,     OpKind::Erf,   OpKind::Reciprocal};
    OpKind k = rng_.chance(30) ? OpKind::Neg : rng_.of(ops);
    Value* v = op(k, {pick()});
    if (rng_.chance(30)) v = op(k, {v});  // neg(neg x), relu(relu x), …
    pool_.push_back(v);
  }

  void binary() {
    static const std::vector<OpKind> ops = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div,
                                            OpKind::Max, OpKind::Min, OpKind::Pow};
    Value* a = pick();
    Value* b = partner(a);
    if (rng_.chance(50)) std::swap(a, b);
    Value* v = rng_.chance(15) ? op(OpKind::Select, {op(OpKind::Gt, {a, b}), a, b}) : op(rng_.of(ops), {a, b});
    pool_.push_back(v);
  }

  void castRoundTrip() {
    static const std::vector<DType> types = {DType::f64, DType::f64, DType::f16, DType::bf16, DType::i32};
    DType t = rng_.of(types);
    Value* v = op(OpKind::Cast, {pick()}, {{"dtype", t}});
    if (rng_.chance(40)) {
      // Arithmetic in the narrow or integer type: rounding and i32 wrap-around.
      Value* c = t == DType::i32 && rng_.chance(50)
                     ? op(OpKind::Constant, {}, {{"shape", Shape{}}, {"dtype", t}, {"value", ir::Floats{2147483647}}})
                     : constant(compatible(v->type.shape), t);
      v = op(rng_.chance(50) ? OpKind::Add : OpKind::Mul, {v, c});
    }
    if (t != DType::f64 && rng_.chance(30)) v = op(OpKind::Cast, {v}, {{"dtype", DType::f64}});
    pool_.push_back(op(OpKind::Cast, {v}, {{"dtype", DType::f32}}));
  }

  void reduce() {
    static const std::vector<OpKind> ops = {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin};
    Value* v = pick();
    Ints axes;
    for (int64_t a = 0; a < v->type.rank(); ++a)
      if (rng_.chance(40)) axes.push_back(a);
    pool_.push_back(op(rng_.of(ops), {v}, {{"axes", axes}, {"keepdim", rng_.chance(50)}}));
  }

  Shape reshaped(const Shape& s) {
    switch (rng_.below(4)) {
      case 0: return s;
      case 1: return {ir::numElements(s)};
      case 2: {  // a new size-1 dimension
        if (static_cast<int64_t>(s.size()) >= kMaxRank) return s;
        Shape out = s;
        out.insert(out.begin() + rng_.below(static_cast<int64_t>(s.size()) + 1), 1);
        return out;
      }
      default: {  // two neighbours merged, or the size-1 dimensions dropped
        Shape out;
        if (s.size() >= 2 && rng_.chance(50)) {
          size_t i = static_cast<size_t>(rng_.below(static_cast<int64_t>(s.size()) - 1));
          out.assign(s.begin(), s.begin() + static_cast<int64_t>(i));
          out.push_back(s[i] * s[i + 1]);
          out.insert(out.end(), s.begin() + static_cast<int64_t>(i) + 2, s.end());
        } else {
          std::copy_if(s.begin(), s.end(), std::back_inserter(out), [](int64_t d) { return d != 1; });
        }
        return out;
      }
    }
  }
  void reshape() {
    Value* v = pick();
    int chain = 1 + static_cast<int>(rng_.below(3));
    for (int i = 0; i < chain; ++i) v = op(OpKind::Reshape, {v}, {{"shape", reshaped(v->type.shape)}});
    pool_.push_back(v);
  }

  void broadcast() {
    Value* v = pick();
    int chain = 1 + static_cast<int>(rng_.below(2));
    for (int i = 0; i < chain; ++i) {
      Shape s = v->type.shape;
      for (int64_t& d : s)
        if (d == 1 && rng_.chance(60)) d = 1 + rng_.below(o_.maxDim);
      if (static_cast<int64_t>(s.size()) < kMaxRank && rng_.chance(40)) s.insert(s.begin(), dim());
      v = op(OpKind::Broadcast, {v}, {{"shape", s}});
    }
    pool_.push_back(v);
  }

  Ints randomPerm(int64_t rank) {
    Ints perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    if (rank >= 2 && rng_.chance(30)) return swapLastTwo(rank);
    if (rng_.chance(20)) return perm;
    for (int64_t i = rank - 1; i > 0; --i) std::swap(perm[i], perm[rng_.below(i + 1)]);
    return perm;
  }
  void permute() {
    Value* v = pick();
    int chain = 1 + static_cast<int>(rng_.below(3));
    for (int i = 0; i < chain; ++i) v = op(OpKind::Permute, {v}, {{"perm", randomPerm(v->type.rank())}});
    pool_.push_back(v);
  }

  void slice() {
    Value* v = pick();
    Ints starts, ends, steps;
    bool whole = rng_.chance(40);
    for (int64_t d : v->type.shape) {
      int64_t start = whole || d == 0 ? 0 : rng_.below(d);
      starts.push_back(start);
      ends.push_back(whole ? d : start + rng_.below(d - start) + 1);
      steps.push_back(whole ? 1 : 1 + rng_.below(2));
    }
    pool_.push_back(op(OpKind::Slice, {v}, {{"starts", starts}, {"ends", ends}, {"steps", steps}}));
  }

  Value* swapped(Value* x) { return op(OpKind::Permute, {x}, {{"perm", swapLastTwo(x->type.rank())}}); }
  /// An operand that computes `x` in one of the forms canonicalize folds: as it is, through a
  /// double transpose, or as a transposed copy read with the transpose flag (`flag` set).
  Value* operand(Value* x, bool& flag) {
    flag = false;
    switch (rng_.below(3)) {
      case 0: return x;
      case 1: return swapped(swapped(x));
      default: flag = true; return swapped(x);
    }
  }
  void matmul() {
    Value* a = pickWithRank(2);
    if (a == nullptr) {
      Value* v = pick();
      a = op(OpKind::Reshape, {v}, {{"shape", Shape{1, v->type.numel()}}});
    }
    const Shape& as = a->type.shape;
    Shape bShape = {as.back(), dim()};
    if (as.size() >= 3 && rng_.chance(50)) bShape.insert(bShape.begin(), as[as.size() - 3]);
    // b: a new input stored transposed half the time, so the permute back is the graph's own.
    Value* b = rng_.chance(50) ? nullptr : constant(bShape);
    if (b == nullptr) {
      Shape stored = bShape;
      bool transposedInput = rng_.chance(50);
      if (transposedInput) std::swap(stored[stored.size() - 2], stored[stored.size() - 1]);
      b = input(stored);
      if (transposedInput) b = swapped(b);
    }
    bool ta = false, tb = false;
    a = operand(a, ta);
    b = operand(b, tb);
    Value* y = op(OpKind::MatMul, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
    if (rng_.chance(40)) y = swapped(y);
    pool_.push_back(y);
  }

  /// An existing node added again, for CSE.
  void repeat() {
    const auto& nodes = g_.nodes();
    if (nodes.empty()) {
      unary();
      return;
    }
    const ir::Node& n = *nodes[static_cast<size_t>(rng_.below(static_cast<int64_t>(nodes.size())))];
    Value* v = g_.addNodeRaw(n.op, n.operands, n.attrs, n.result->type);
    if (v->type.dtype == DType::f32) pool_.push_back(v);
  }

  /// An expression of constants only (in f32, f64, f16 or wrapping i32 arithmetic), then combined
  /// with the walk.
  void foldable() {
    static const std::vector<DType> types = {DType::f32, DType::f32, DType::f64, DType::f16, DType::i32};
    static const std::vector<OpKind> binaries = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max};
    static const std::vector<OpKind> floatUnaries = {OpKind::Exp, OpKind::Sin, OpKind::Tanh, OpKind::Sqrt,
                                                     OpKind::Neg};
    static const std::vector<OpKind> intUnaries = {OpKind::Neg, OpKind::Abs, OpKind::Relu};
    DType t = rng_.of(types);
    Value* c = constant(shape(1 + rng_.below(2)), t);
    Value* other = t == DType::i32 && rng_.chance(40)
                       ? op(OpKind::Constant, {}, {{"shape", Shape{}}, {"dtype", t}, {"value", ir::Floats{2147483647}}})
                       : constant(compatible(c->type.shape), t);
    c = op(rng_.of(binaries), {c, other});
    if (rng_.chance(50)) c = op(OpKind::Permute, {c}, {{"perm", randomPerm(c->type.rank())}});
    for (int64_t i = rng_.below(3); i > 0; --i) c = op(rng_.of(isFloat(t) ? floatUnaries : intUnaries), {c});
    if (t != DType::f32) c = op(OpKind::Cast, {c}, {{"dtype", DType::f32}});
    Value* a = pick();
    Shape out;
    if (ir::broadcastShapes(a->type.shape, c->type.shape, out) && static_cast<int64_t>(out.size()) <= kMaxRank)
      c = op(OpKind::Mul, {a, c});
    pool_.push_back(c);
  }

  /// The last value, most values nothing reads (so most of the walk is live), and now and then an
  /// input.
  void addOutputs() {
    std::vector<bool> read(pool_.size(), false);
    for (const auto& n : g_.nodes())
      for (const Value* v : n->operands)
        for (size_t i = 0; i < pool_.size(); ++i) read[i] = read[i] || pool_[i] == v;
    int count = 0;
    g_.addOutput(fmt::format("out{}", count++), pool_.back());
    for (size_t i = 0; i + 1 < pool_.size(); ++i)
      if (!read[i] && pool_[i]->kind == ir::ValueKind::Result && rng_.chance(80))
        g_.addOutput(fmt::format("out{}", count++), pool_[i]);
    if (rng_.chance(10)) g_.addOutput(fmt::format("out{}", count++), g_.inputs()[0]);
    for (const ir::Param& p : g_.params()) {
      std::vector<Value*> same;
      for (Value* v : pool_)
        if (v->type == p.value->type && v != p.value) same.push_back(v);
      if (!same.empty()) g_.addUpdate(p.value, rng_.of(same));
    }
  }

  Rng rng_;
  RandomGraphOptions o_;
  ir::Graph g_;
  std::vector<Value*> pool_;
  int inputCount_ = 0;
};

}  // namespace

ir::Graph randomGraph(uint64_t seed, const RandomGraphOptions& options) { return Walk(seed, options).run(); }

interp::TensorMap randomInputs(const ir::Graph& g, uint64_t seed) {
  Rng rng(seed);
  interp::TensorMap inputs;
  for (const Value* v : g.inputs()) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, isFloat(v->type.dtype) ? static_cast<double>(rng.bits() >> 11) * 0x1.0p-51 - 2.0
                                      : static_cast<double>(rng.below(4)));
    inputs.emplace(v->name, std::move(t));
  }
  return inputs;
}

}  // namespace kiln::testing
