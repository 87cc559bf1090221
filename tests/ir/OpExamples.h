// One small valid use of every op in ir/Ops.def, with non-default attributes where the op has
// any. The round-trip test asserts this table covers allOps(), so a new op without an example
// fails the test suite.
#pragma once

#include "ir/Graph.h"

#include <string>
#include <vector>

namespace kiln::ir::testing {

struct OpExample {
  std::string op;
  std::vector<TensorType> operands;
  std::vector<NamedAttr> attrs;
};

inline TensorType T(DType t, Shape s) { return TensorType{t, std::move(s)}; }

inline std::vector<OpExample> opExamples() {
  const DType f = DType::f32, b = DType::boolean, l = DType::i64;
  std::vector<OpExample> ex;
  for (const char* unary : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "sin",
                            "cos", "erf", "relu", "floor", "silu"})
    ex.push_back({unary, {T(f, {2, 3})}, {}});
  ex.push_back({"not", {T(b, {4})}, {}});
  ex.push_back({"cast", {T(f, {2, 3})}, {{"dtype", DType::bf16}}});
  for (const char* binary : {"add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"})
    ex.push_back({binary, {T(f, {2, 3}), T(f, {3})}, {}});
  ex.push_back({"and", {T(b, {2, 1}), T(b, {3})}, {}});
  ex.push_back({"or", {T(b, {4}), T(b, {4})}, {}});
  ex.push_back({"select", {T(b, {2, 3}), T(f, {2, 3}), T(f, {1})}, {}});
  ex.push_back({"reduce_sum", {T(f, {2, 3, 4})}, {{"axes", Ints{0, 2}}, {"keepdim", true}}});
  ex.push_back({"reduce_max", {T(f, {2, 3})}, {{"axes", Ints{-1}}}});
  ex.push_back({"reduce_min", {T(DType::i32, {2, 3})}, {{"axes", Ints{}}}});
  ex.push_back({"reduce_mean", {T(f, {2, 3})}, {{"axes", Ints{1}}, {"keepdim", true}}});
  ex.push_back({"argmax", {T(f, {2, 3})}, {{"axis", int64_t{1}}, {"keepdim", true}}});
  ex.push_back({"argmin", {T(f, {2, 3})}, {{"axis", int64_t{0}}}});
  ex.push_back({"reshape", {T(f, {2, 3})}, {{"shape", Ints{3, 1, 2}}}});
  ex.push_back({"permute", {T(f, {2, 3, 4})}, {{"perm", Ints{2, 0, 1}}}});
  ex.push_back({"broadcast", {T(f, {3, 1})}, {{"shape", Ints{2, 3, 4}}}});
  ex.push_back({"slice", {T(f, {4, 6})}, {{"starts", Ints{0, 1}}, {"ends", Ints{4, 6}}, {"steps", Ints{2, 2}}}});
  ex.push_back({"concat", {T(f, {2, 3}), T(f, {2, 5}), T(f, {2, 1})}, {{"axis", int64_t{-1}}}});
  ex.push_back({"pad", {T(f, {2, 3})}, {{"low", Ints{0, 1}}, {"high", Ints{2, 0}}, {"value", -1.5}}});
  ex.push_back({"gather", {T(f, {5, 3}), T(l, {2, 4})}, {{"axis", int64_t{0}}}});
  ex.push_back({"one_hot", {T(l, {4})}, {{"num_classes", int64_t{10}}, {"dtype", DType::f16}}});
  ex.push_back({"matmul", {T(f, {7, 3, 2}), T(f, {4, 3})}, {{"transpose_a", true}, {"transpose_b", true}}});
  ex.push_back({"conv2d",
                {T(f, {1, 4, 9, 9}), T(f, {6, 2, 3, 3})},
                {{"stride", Ints{2, 1}}, {"padding", Ints{1, 0}}, {"dilation", Ints{1, 2}}, {"groups", int64_t{2}}}});
  ex.push_back({"max_pool2d", {T(f, {1, 2, 4, 4})}, {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}});
  ex.push_back({"avg_pool2d",
                {T(f, {1, 2, 5, 5})},
                {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}, {"count_include_pad", false}}});
  // Gradient helpers: the adjoints of the examples above.
  ex.push_back({"stop_gradient", {T(f, {2, 3})}, {}});
  ex.push_back({"slice_grad", {T(f, {2, 3})}, {{"shape", Ints{4, 6}}, {"starts", Ints{0, 1}}, {"steps", Ints{2, 2}}}});
  ex.push_back({"scatter_add", {T(l, {2, 4}), T(f, {2, 4, 3})}, {{"axis", int64_t{0}}, {"dim_size", int64_t{5}}}});
  ex.push_back({"conv2d_grad_input",
                {T(f, {1, 6, 5, 5}), T(f, {6, 2, 3, 3})},
                {{"input_shape", Ints{1, 4, 9, 9}}, {"stride", Ints{2, 1}}, {"padding", Ints{1, 0}},
                 {"dilation", Ints{1, 2}}, {"groups", int64_t{2}}}});
  ex.push_back({"conv2d_grad_weight",
                {T(f, {1, 4, 9, 9}), T(f, {1, 6, 5, 5})},
                {{"weight_shape", Ints{6, 2, 3, 3}}, {"stride", Ints{2, 1}}, {"padding", Ints{1, 0}},
                 {"dilation", Ints{1, 2}}, {"groups", int64_t{2}}}});
  ex.push_back({"max_pool2d_grad",
                {T(f, {1, 2, 4, 4}), T(f, {1, 2, 3, 3})},
                {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}}});
  ex.push_back({"avg_pool2d_grad",
                {T(f, {1, 2, 3, 3})},
                {{"input_shape", Ints{1, 2, 5, 5}}, {"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}},
                 {"padding", Ints{1, 1}}, {"count_include_pad", false}}});
  ex.push_back({"constant", {}, {{"shape", Ints{2}}, {"dtype", DType::f64}, {"value", Floats{0.5, -3}}}});
  ex.push_back({"iota", {}, {{"shape", Ints{2, 3}}, {"axis", int64_t{1}}, {"dtype", DType::i32}}});
  ex.push_back({"random",
                {},
                {{"shape", Ints{4}}, {"dist", std::string("normal")}, {"seed", int64_t{7}}, {"offset", int64_t{64}}}});
  ex.push_back({"random", {T(l, {})}, {{"shape", Ints{2, 3}}, {"seed", int64_t{7}}}});  // with a step counter
  ex.push_back({"linear", {T(f, {2, 3}), T(f, {4, 3}), T(f, {4})}, {}});
  ex.push_back({"gelu", {T(f, {2, 3})}, {{"approximate", std::string("tanh")}}});
  ex.push_back({"softmax", {T(f, {2, 3})}, {{"axis", int64_t{0}}}});
  ex.push_back({"log_softmax", {T(f, {2, 3})}, {}});
  ex.push_back({"cross_entropy", {T(f, {4, 10}), T(l, {4})}, {{"reduction", std::string("sum")}}});
  ex.push_back({"mse", {T(f, {4, 2}), T(f, {4, 2})}, {{"reduction", std::string("none")}}});
  ex.push_back({"bce_with_logits", {T(f, {4}), T(f, {4})}, {}});
  ex.push_back({"layer_norm", {T(f, {2, 3, 8}), T(f, {3, 8}), T(f, {3, 8})},
                {{"normalized_ndim", int64_t{2}}, {"eps", 1e-6}}});
  ex.push_back({"dropout", {T(f, {2, 3})}, {{"p", 0.1}, {"seed", int64_t{3}}, {"offset", int64_t{12}}}});
  ex.push_back({"dropout", {T(f, {2, 3}), T(l, {})}, {{"p", 0.5}, {"seed", int64_t{3}}}});
  ex.push_back({"embedding", {T(DType::i32, {2, 5}), T(f, {10, 8})}, {}});
  ex.push_back({"attention", {T(f, {2, 4, 8}), T(f, {2, 4, 8}), T(f, {2, 4, 5})},
                {{"causal", true}, {"scale", 0.125}}});
  return ex;
}

}  // namespace kiln::ir::testing
