// The op kernels of the CPU backend (codegen/cpu/RenderOps.h) against the reference interpreter:
// one-node graphs of every op that gets a dedicated kernel, lowered (kernels::lowerGraph), rendered,
// compiled and run on thread pools of 1 and 2 threads, over awkward shapes, strides, paddings and
// every dtype the op accepts. Exact ops (copies, one_hot, argmax, max pooling, pooling gradients
// without overlapping windows, uniform draws) must match bit for bit; sums match within a tolerance
// per dtype.
// Inputs of max pooling and argmax are small integers (ties) with NaNs, -0.0 and +0.0 mixed in.
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelAbi.h"
#include "codegen/cpu/RenderOps.h"
#include "interp/Interpreter.h"
#include "ir/Graph.h"
#include "kernels/Kernel.h"
#include "runtime/ThreadPool.h"

#include <llvm/IR/Module.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>

namespace {

using namespace kiln;
using ir::OpKind;

/// Input values: uniform in [-2, 2], or (Ties) small integers with NaN, -0.0 and +0.0 mixed in.
enum class Fill { Uniform, Ties };

class OpKernelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    jit_ = new cpu::Jit();
    baseline_ = new cpu::Jit({.cpu = "x86-64", .features = "", .cacheDir = "", .emulateBf16Dot = false});
    for (cpu::Jit* jit : {jit_, baseline_})
      jit->defineSymbol("kiln_parallel_for", reinterpret_cast<void*>(&kiln_parallel_for));
  }
  static void TearDownTestSuite() {
    delete jit_;
    delete baseline_;
    jit_ = baseline_ = nullptr;
  }

  /// A graph of one `op` node on inputs x0, x1, … of `types`, with output y.
  static ir::Graph single(OpKind op, const std::vector<ir::TensorType>& types,
                          const std::vector<ir::NamedAttr>& attrs) {
    ir::Graph g("op");
    std::vector<ir::Value*> operands;
    for (size_t i = 0; i < types.size(); ++i) operands.push_back(g.addInput("x" + std::to_string(i), types[i]));
    g.addOutput("y", g.addNode(op, operands, attrs));
    return g;
  }

  rt::HostTensor random(const ir::TensorType& type, Fill fill, int64_t indexLimit = 4) {
    rt::HostTensor t(type.dtype, type.shape);
    std::uniform_real_distribution<double> uniform(-2, 2);
    std::uniform_int_distribution<int> small(-3, 3), pick(0, 15);
    std::uniform_int_distribution<int64_t> index(0, std::max<int64_t>(indexLimit - 1, 0));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!isFloat(type.dtype)) {
        t.set(i, type.dtype == DType::boolean ? pick(rng_) % 2 : static_cast<double>(index(rng_)));
      } else if (fill == Fill::Uniform) {
        t.set(i, uniform(rng_));
      } else {
        int p = pick(rng_);
        t.set(i, p == 0 ? NAN : p == 1 ? -0.0 : p == 2 ? 0.0 : small(rng_));
      }
    }
    return t;
  }

  /// Random inputs for g: floats by `fill`, integers in [0, indexLimit).
  interp::TensorMap inputsFor(const ir::Graph& g, Fill fill, int64_t indexLimit = 4) {
    interp::TensorMap in;
    for (const ir::Value* v : g.inputs()) in.emplace(v->name, random(v->type, fill, indexLimit));
    return in;
  }

  /// The graph's only kernel, rendered and compiled by `jit`.
  static std::pair<kernels::Kernel, std::shared_ptr<const cpu::CompiledModule>> compile(const ir::Graph& g,
                                                                                        cpu::Jit& jit) {
    std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
    EXPECT_EQ(ks.size(), 1u);
    EXPECT_EQ(ks.at(0).kind, ir::KernelKind::Op);
    auto m = std::make_unique<llvm::Module>(ks[0].name, jit.context());
    cpu::renderOpKernel(*m, ks[0], cpu::isaOf(jit));
    return {ks[0], jit.compile(std::move(m))};
  }

  /// The graph's only kernel run on `inputs` with a pool of `threads`.
  static rt::HostTensor runKernel(const ir::Graph& g, const interp::TensorMap& inputs, int threads,
                                  cpu::Jit& jit = *jit_) {
    auto [k, compiled] = compile(g, jit);
    auto fn = compiled->fn<void(void**, void*)>(k.name);
    rt::HostTensor out(k.buffers[k.outputs[0]].type.dtype, k.buffers[k.outputs[0]].type.shape);
    // The result and the scratch area between guard bytes that must stay untouched; the result
    // starts as garbage, so every element must be written.
    constexpr size_t kGuard = 64;
    auto guarded = [](size_t bytes) { return std::vector<std::byte>(bytes + 2 * kGuard, std::byte{0xA5}); };
    std::vector<std::byte> result = guarded(out.bytes());
    std::vector<std::byte> scratch = guarded(static_cast<size_t>(cpu::opKernelScratchBytes(k)));
    std::vector<void*> bufs;
    for (const kernels::Buffer& b : k.buffers)
      bufs.push_back(b.value->kind == ir::ValueKind::Input ? const_cast<void*>(inputs.at(b.value->name).data())
                                                          : result.data() + kGuard);
    bufs.push_back(scratch.data() + kGuard);
    rt::ThreadPool pool(threads);
    fn(bufs.data(), &pool);
    auto isGuard = [](std::byte x) { return x == std::byte{0xA5}; };
    for (const std::vector<std::byte>* area : {&result, &scratch})
      EXPECT_TRUE(std::all_of(area->begin(), area->begin() + kGuard, isGuard) &&
                  std::all_of(area->end() - kGuard, area->end(), isGuard))
          << k.name << " writes outside its " << (area == &result ? "result" : "scratch area");
    std::memcpy(out.data(), result.data() + kGuard, out.bytes());
    return out;
  }

  /// Runs g through the interpreter and through its op kernel on 1 and 2 threads: bit for bit
  /// when `relTol` is 0, else |got - want| <= relTol · max(1, |want|).
  static void check(const ir::Graph& g, const interp::TensorMap& inputs, double relTol, const std::string& what,
                    cpu::Jit& jit = *jit_) {
    SCOPED_TRACE(what);
    rt::HostTensor want = interp::run(g, inputs).at("y");
    for (int threads : {1, 2}) {
      rt::HostTensor got = runKernel(g, inputs, threads, jit);
      ASSERT_EQ(got.typeStr(), want.typeStr());
      if (relTol == 0) {
        for (int64_t i = 0; i < want.numel(); ++i) {
          size_t size = static_cast<size_t>(dtypeSize(want.dtype()));
          const char *a = static_cast<const char*>(got.data()), *b = static_cast<const char*>(want.data());
          if (std::memcmp(a + i * size, b + i * size, size) != 0) {
            ADD_FAILURE() << threads << " threads: element " << i << " is " << got.at(i) << ", expected " << want.at(i);
            break;
          }
        }
      } else {
        for (int64_t i = 0; i < want.numel(); ++i) {
          double a = got.at(i), b = want.at(i);
          if (!(std::fabs(a - b) <= relTol * std::max(1.0, std::fabs(b))) && !(std::isnan(a) && std::isnan(b))) {
            ADD_FAILURE() << threads << " threads: element " << i << " is " << a << ", expected " << b;
            break;
          }
        }
      }
    }
  }

  /// Tolerance of a sum of a few terms rounded to `t` (0 for integers: exact).
  static double sumTolerance(DType t) {
    switch (t) {
      case DType::f16: return 2e-3;
      case DType::bf16: return 1.6e-2;
      case DType::f32: return 2e-6;
      case DType::f64: return 1e-14;
      default: return 0;
    }
  }

  static std::string name(DType t, const std::string& rest) { return std::string(dtypeName(t)) + " " + rest; }

  static inline cpu::Jit* jit_ = nullptr;       // the host
  static inline cpu::Jit* baseline_ = nullptr;  // x86-64: SSE2, four f32 lanes
  std::mt19937_64 rng_{42};
};

constexpr DType kFloats[] = {DType::f32, DType::f16, DType::bf16, DType::f64};
constexpr DType kNumeric[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64};

/// The dtypes case `i` of a table runs with: every one of `all` for the first case, else all[0]
/// (f32) and one more in turn, so each dtype meets several shapes and each shape f32 while the
/// number of kernels to compile stays small.
std::vector<DType> dtypesFor(size_t i, std::span<const DType> all) {
  if (i == 0) return {all.begin(), all.end()};
  return {all[0], all[1 + (i - 1) % (all.size() - 1)]};
}

/// A pooling configuration: input shape, kernel, stride, padding.
struct Pool {
  ir::Shape x;
  ir::Ints kernel, stride, padding;
  std::string str() const {
    return fmt::format("x{} k{} s{} p{}", ir::shapeStr(x), ir::shapeStr(kernel), ir::shapeStr(stride),
                       ir::shapeStr(padding));
  }
  bool overlaps() const { return stride[0] < kernel[0] || stride[1] < kernel[1]; }
};

const std::vector<Pool> kPools = {
    {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0}},       {{1, 2, 33, 35}, {3, 3}, {2, 2}, {1, 1}},
    {{2, 1, 8, 40}, {3, 3}, {1, 1}, {1, 1}},      {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}},
    {{1, 2, 12, 257}, {2, 2}, {2, 2}, {1, 1}},    {{1, 2, 9, 20}, {2, 3}, {3, 1}, {1, 1}},
    {{1, 1, 6, 70}, {4, 4}, {4, 4}, {2, 2}},      {{1, 2, 11, 60}, {5, 5}, {5, 5}, {0, 2}},
    {{1, 1, 10, 50}, {2, 3}, {3, 4}, {1, 0}},     {{4, 8, 64, 64}, {2, 2}, {2, 2}, {0, 0}},
    {{2, 16, 40, 40}, {3, 3}, {2, 2}, {1, 1}},
    // Windows that tile the input (the gradients store every dx element without zeroing first):
    // seven per row in groups of four, the last group shifted back; and three per row, one by one.
    {{2, 3, 14, 14}, {2, 2}, {2, 2}, {0, 0}},     {{1, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0}},
};

std::vector<ir::NamedAttr> poolAttrs(const Pool& p) {
  return {{"kernel", p.kernel}, {"stride", p.stride}, {"padding", p.padding}};
}

TEST_F(OpKernelTest, MaxPool2dIsExactWithTiesAndNaN) {
  for (size_t i = 0; i < kPools.size(); ++i)
    for (DType t : dtypesFor(i, kFloats)) {
      const Pool& p = kPools[i];
      ir::Graph g = single(OpKind::MaxPool2d, {{t, p.x}}, poolAttrs(p));
      check(g, inputsFor(g, Fill::Ties), 0, name(t, p.str()));
    }
}

TEST_F(OpKernelTest, AvgPool2dWithAndWithoutPadInDivisor) {
  for (size_t i = 0; i < kPools.size(); ++i)
    for (DType t : dtypesFor(i, kFloats))
      for (bool includePad : {true, false}) {
        const Pool& p = kPools[i];
        std::vector<ir::NamedAttr> attrs = poolAttrs(p);
        attrs.push_back({"count_include_pad", includePad});
        ir::Graph g = single(OpKind::AvgPool2d, {{t, p.x}}, attrs);
        check(g, inputsFor(g, Fill::Uniform), sumTolerance(t), name(t, p.str() + (includePad ? " include_pad" : "")));
      }
}

TEST_F(OpKernelTest, MaxPool2dGradGoesToTheFirstMaximum) {
  for (size_t i = 0; i < kPools.size(); ++i)
    for (DType t : dtypesFor(i, kFloats)) {
      const Pool& p = kPools[i];
      ir::Graph fwd = single(OpKind::MaxPool2d, {{t, p.x}}, poolAttrs(p));
      ir::TensorType dy = fwd.outputs()[0].value->type;
      ir::Graph g = single(OpKind::MaxPool2dGrad, {{t, p.x}, dy}, poolAttrs(p));
      interp::TensorMap in = {{"x0", random({t, p.x}, Fill::Ties)}, {"x1", random(dy, Fill::Uniform)}};
      // Without overlap every dx element is one dy or zero: exact.
      check(g, in, p.overlaps() ? sumTolerance(t) : 0, name(t, p.str()));
    }
}

TEST_F(OpKernelTest, AvgPool2dGradSumsTheCoveringWindows) {
  for (size_t i = 0; i < kPools.size(); ++i)
    for (DType t : dtypesFor(i, kFloats))
      for (bool includePad : {true, false}) {
        const Pool& p = kPools[i];
        std::vector<ir::NamedAttr> attrs = poolAttrs(p);
        attrs.push_back({"count_include_pad", includePad});
        ir::Graph fwd = single(OpKind::AvgPool2d, {{t, p.x}}, attrs);
        attrs.push_back({"input_shape", p.x});
        ir::Graph g = single(OpKind::AvgPool2dGrad, {fwd.outputs()[0].value->type}, attrs);
        // Without overlap every dx element is one correctly rounded quotient or zero: exact.
        check(g, inputsFor(g, Fill::Uniform), p.overlaps() ? sumTolerance(t) : 0,
              name(t, p.str() + (includePad ? " include_pad" : "")));
      }
}

TEST_F(OpKernelTest, ArgMaxArgMinTakeTheFirstExtremeAndNaN) {
  struct Case {
    ir::Shape shape;
    int64_t axis;
  };
  const Case cases[] = {{{7}, 0}, {{3, 33}, 1}, {{5, 4, 9}, 0}, {{5, 4, 9}, 2}, {{2, 17, 3}, 1}, {{4, 40, 20}, 1},
                        {{1}, 0}, {{300, 257}, -1}, {{257, 300}, 0}};
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
    for (size_t i = 0; i < std::size(cases); ++i)
      for (DType t : dtypesFor(i, kNumeric)) {
        const Case& c = cases[i];
        ir::Graph g = single(op, {{t, c.shape}}, {{"axis", c.axis}, {"keepdim", i % 2 == 1}});
        check(g, inputsFor(g, Fill::Ties, 3), 0,
              name(t, fmt::format("{} {} axis {}", ir::opName(op), ir::shapeStr(c.shape), c.axis)));
      }
}

TEST_F(OpKernelTest, OneHotOfEveryDTypeWithOutOfRangeIndices) {
  struct Case {
    ir::Shape shape;
    int64_t classes;
  };
  const Case cases[] = {{{7}, 10}, {{3, 5}, 33}, {{}, 1}, {{2, 2}, 1}, {{7}, 3}, {{1}, 17}};
  for (size_t i = 0; i < std::size(cases); ++i)
    for (DType t : dtypesFor(i, kAllDTypes)) {
      const Case& c = cases[i];
      ir::Graph g = single(OpKind::OneHot, {{i % 2 ? DType::i32 : DType::i64, c.shape}},
                           {{"num_classes", c.classes}, {"dtype", t}});
      interp::TensorMap in = inputsFor(g, Fill::Uniform, c.classes + 2);  // some indices out of range
      rt::HostTensor& x = in.at("x0");
      if (x.numel() > 1) x.set(1, -1);
      check(g, in, 0, name(t, fmt::format("{} {} classes", ir::shapeStr(c.shape), c.classes)));
    }
  ir::Graph big = single(OpKind::OneHot, {{DType::i64, {5000}}}, {{"num_classes", 30}});
  check(big, inputsFor(big, Fill::Uniform, 30), 0, "5000 x 30");
}

TEST_F(OpKernelTest, GatherAlongEveryAxis) {
  struct Case {
    ir::Shape data, indices;
    int64_t axis;
  };
  const Case cases[] = {{{10, 6}, {7}, 0},       {{10, 6}, {2, 3}, 0},  {{4, 9, 5}, {3, 4}, 1},
                        {{5, 33}, {7}, 1},       {{5, 33}, {}, -1},      {{1}, {1}, 0},
                        {{50, 64}, {40, 30}, 0}};
  for (size_t i = 0; i < std::size(cases); ++i)
    for (DType t : dtypesFor(i, kAllDTypes)) {
        const Case& c = cases[i];
        DType index = i % 2 ? DType::i32 : DType::i64;
        ir::Graph g = single(OpKind::Gather, {{t, c.data}, {index, c.indices}}, {{"axis", c.axis}});
        int64_t dim = c.data[static_cast<size_t>(ir::normalizeAxis(c.axis, static_cast<int64_t>(c.data.size())))];
        interp::TensorMap in = inputsFor(g, Fill::Uniform, dim);
        check(g, in, 0,
              name(t, fmt::format("data{} indices{} axis {}", ir::shapeStr(c.data), ir::shapeStr(c.indices), c.axis)));
      }
}

TEST_F(OpKernelTest, GatherWritesZerosForOutOfRangeIndices) {
  ir::Graph g = single(OpKind::Gather, {{DType::f32, {3, 2}}, {DType::i64, {4}}}, {{"axis", 0}});
  interp::TensorMap in = {{"x0", rt::HostTensor::fromDoubles(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6})},
                          {"x1", rt::HostTensor::fromDoubles(DType::i64, {4}, {2, -1, 3, 0})}};
  EXPECT_EQ(runKernel(g, in, 1).toDoubles(), (std::vector<double>{5, 6, 0, 0, 0, 0, 1, 2}));
}

TEST_F(OpKernelTest, ScatterAddAccumulatesRepeatedIndices) {
  struct Case {
    ir::Shape indices, updates;
    int64_t axis, dim;
  };
  const Case cases[] = {{{7}, {7, 5}, 0, 4},        {{2, 4}, {3, 2, 4, 33}, 1, 5}, {{9}, {9}, 0, 3},
                        {{257}, {257, 96}, 0, 50},  {{300}, {16, 300, 40}, 1, 20}, {{1}, {2, 1}, 1, 1}};
  for (size_t i = 0; i < std::size(cases); ++i)
    for (DType t : dtypesFor(i, kNumeric)) {
        const Case& c = cases[i];
        DType index = i % 2 ? DType::i32 : DType::i64;
        ir::Graph g = single(OpKind::ScatterAdd, {{index, c.indices}, {t, c.updates}},
                             {{"axis", c.axis}, {"dim_size", c.dim}});
        interp::TensorMap in = {{"x0", random({index, c.indices}, Fill::Uniform, c.dim)},
                                {"x1", random({t, c.updates}, Fill::Uniform, 1000)}};
        // Up to ~100 terms per element: allow a few more roundings.
        check(g, in, 8 * sumTolerance(t),
              name(t, fmt::format("indices{} updates{} axis {}", ir::shapeStr(c.indices), ir::shapeStr(c.updates),
                                  c.axis)));
      }
}

TEST_F(OpKernelTest, ScatterAddSkipsOutOfRangeIndices) {
  ir::Graph g = single(OpKind::ScatterAdd, {{DType::i32, {4}}, {DType::f16, {4, 2}}}, {{"axis", 0}, {"dim_size", 2}});
  interp::TensorMap in = {{"x0", rt::HostTensor::fromDoubles(DType::i32, {4}, {1, 2, -1, 1})},
                          {"x1", rt::HostTensor::fromDoubles(DType::f16, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}};
  EXPECT_EQ(runKernel(g, in, 1).toDoubles(), (std::vector<double>{0, 0, 8, 10}));
}

TEST_F(OpKernelTest, ConcatOfEveryDType) {
  struct Case {
    std::vector<ir::Shape> operands;
    int64_t axis;
  };
  const Case cases[] = {{{{3, 5}}, 0},        {{{3, 5}, {4, 5}}, 0},           {{{3, 5}, {3, 1}, {3, 7}}, 1},
                        {{{2, 3, 4}, {2, 1, 4}, {2, 3, 4}}, -2}, {{{7}, {33}}, 0}, {{{600, 64}, {600, 64}}, 1}};
  for (size_t i = 0; i < std::size(cases); ++i)
    for (DType t : dtypesFor(i, kAllDTypes)) {
      const Case& c = cases[i];
      std::vector<ir::TensorType> types;
      for (const ir::Shape& s : c.operands) types.push_back({t, s});
      ir::Graph g = single(OpKind::Concat, types, {{"axis", c.axis}});
      check(g, inputsFor(g, Fill::Uniform), 0, name(t, fmt::format("{} operands axis {}", c.operands.size(), c.axis)));
    }
}

TEST_F(OpKernelTest, SliceGradPlacesDyIntoZeros) {
  struct Case {
    ir::Shape dy, shape;
    ir::Ints starts, steps;
  };
  const Case cases[] = {{{3, 2}, {7, 5}, {1, 0}, {2, 3}},
                        {{4}, {9}, {1}, {2}},
                        {{3, 4}, {5, 9}, {2, 3}, {1, 1}},
                        {{}, {}, {}, {}},
                        {{2, 3, 5}, {4, 7, 33}, {1, 2, 20}, {2, 2, 1}},
                        {{0, 3}, {4, 3}, {2, 0}, {1, 1}},
                        {{300, 32}, {1200, 64}, {7, 1}, {2, 2}},
                        {{1, 32, 2, 32, 32}, {3, 32, 2, 32, 32}, {1, 0, 0, 0, 0}, {1, 1, 1, 1, 1}}};
  for (size_t i = 0; i < std::size(cases); ++i)
    for (DType t : dtypesFor(i, kAllDTypes)) {
      const Case& c = cases[i];
      ir::Graph g =
          single(OpKind::SliceGrad, {{t, c.dy}}, {{"shape", c.shape}, {"starts", c.starts}, {"steps", c.steps}});
      check(g, inputsFor(g, Fill::Uniform), 0,
            name(t, fmt::format("dy{} into {}", ir::shapeStr(c.dy), ir::shapeStr(c.shape))));
    }
}

TEST_F(OpKernelTest, RandomWithAStepDrawsTheInterpretersNumbers) {
  const ir::Shape shapes[] = {{5000}, {7}, {33, 9}};
  for (const std::string dist : {"uniform", "normal"})
    for (size_t i = 0; i < std::size(shapes); ++i)
      for (DType t : dtypesFor(i, kFloats)) {
        std::vector<ir::NamedAttr> attrs = {{"shape", shapes[i]}, {"dtype", t},         {"dist", dist},
                                            {"seed", int64_t{1234567890123}}, {"offset", int64_t{3}}};
        ir::Graph g = single(OpKind::Random, {{DType::i64, {}}}, attrs);
        for (int64_t step : {int64_t{0}, int64_t{5}, int64_t{-1}, int64_t{1} << 40}) {
          interp::TensorMap in = {{"x0", rt::HostTensor::fromDoubles(DType::i64, {}, {static_cast<double>(step)})}};
          // Normal draws use VecMath's log (a few ulp) before the last rounding.
          double tol = dist == "uniform" ? 0 : t == DType::f32 || t == DType::f64 ? 1e-6 : sumTolerance(t);
          check(g, in, tol, name(t, fmt::format("{} step {} {}", dist, step, ir::shapeStr(shapes[i]))));
        }
      }
}

// Four lanes (two for f64), no FMA: the narrow vector paths run on every x86-64.
TEST_F(OpKernelTest, BaselineX86_64) {
  for (DType t : {DType::f32, DType::f16, DType::f64})
    for (const Pool& p : {kPools[0], kPools[1], kPools[2], kPools[4]}) {
      ir::Graph pool = single(OpKind::MaxPool2d, {{t, p.x}}, poolAttrs(p));
      check(pool, inputsFor(pool, Fill::Ties), 0, name(t, "max_pool2d " + p.str()), *baseline_);
      ir::Graph grad = single(OpKind::MaxPool2dGrad, {{t, p.x}, pool.outputs()[0].value->type}, poolAttrs(p));
      interp::TensorMap in = {{"x0", random({t, p.x}, Fill::Ties)},
                              {"x1", random(pool.outputs()[0].value->type, Fill::Uniform)}};
      check(grad, in, p.overlaps() ? sumTolerance(t) : 0, name(t, "max_pool2d_grad " + p.str()), *baseline_);
    }
  ir::Graph argmax = single(OpKind::ArgMax, {{DType::f64, {3, 5, 9}}}, {{"axis", int64_t{1}}});
  check(argmax, inputsFor(argmax, Fill::Ties), 0, "argmax", *baseline_);
  ir::Graph random = single(OpKind::Random, {{DType::i64, {}}}, {{"shape", ir::Shape{37}}, {"seed", int64_t{9}}});
  check(random, {{"x0", rt::HostTensor::fromDoubles(DType::i64, {}, {3})}}, 0, "random", *baseline_);
}

// AVX-512 (sixteen lanes) cannot run here; the kernels must still verify and compile.
TEST_F(OpKernelTest, Avx512Compiles) {
  cpu::Jit avx512({.cpu = "skylake-avx512", .features = "", .cacheDir = "", .emulateBf16Dot = false});
  for (const Pool& p : {kPools[1], kPools[6]})
    for (OpKind op : {OpKind::MaxPool2d, OpKind::AvgPool2d}) {
      std::vector<ir::NamedAttr> attrs = poolAttrs(p);
      ir::Graph pool = single(op, {{DType::bf16, p.x}}, attrs);
      EXPECT_NO_THROW(compile(pool, avx512));
      ir::TensorType dy = pool.outputs()[0].value->type;
      if (op == OpKind::AvgPool2d) attrs.push_back({"input_shape", p.x});
      ir::Graph grad = op == OpKind::MaxPool2d ? single(OpKind::MaxPool2dGrad, {{DType::bf16, p.x}, dy}, attrs)
                                               : single(OpKind::AvgPool2dGrad, {dy}, attrs);
      EXPECT_NO_THROW(compile(grad, avx512));
    }
  ir::Graph random = single(OpKind::Random, {{DType::i64, {}}},
                            {{"shape", ir::Shape{100}}, {"seed", int64_t{1}}, {"dist", std::string("normal")}});
  EXPECT_NO_THROW(compile(random, avx512));
}

TEST_F(OpKernelTest, OpsWithoutAKernelAreErrors) {
  ir::Graph g("composite");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  g.addOutput("y", g.addNode(OpKind::Softmax, {x}, {}));
  std::vector<kernels::Kernel> ks = kernels::lowerGraph(g);
  ASSERT_EQ(ks.size(), 1u);
  llvm::Module m("m", jit_->context());
  try {
    cpu::renderOpKernel(m, ks[0], cpu::isaOf(*jit_));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no op kernel for 'softmax'"), std::string::npos) << e.what();
  }
}

}  // namespace
