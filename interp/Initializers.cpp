// Parameter initializers, drawn from the same counter-based generator as the `random` op.
#include "interp/Interpreter.h"

#include "support/Philox.h"

#include <cmath>

namespace kiln::interp {

rt::HostTensor initialize(const ir::Param& param) {
  const ir::TensorType& type = param.value->type;
  const ir::Initializer& init = param.init;
  rt::HostTensor t(type.dtype, type.shape);
  auto fill = [&](auto&& store) {
    const int64_t n = t.numel();
    switch (init.kind) {
      case ir::Initializer::Kind::Zeros:
        for (int64_t i = 0; i < n; ++i) store(i, 0.0);
        break;
      case ir::Initializer::Kind::Ones:
        for (int64_t i = 0; i < n; ++i) store(i, 1.0);
        break;
      case ir::Initializer::Kind::Constant:
        for (int64_t i = 0; i < n; ++i) store(i, init.a);
        break;
      case ir::Initializer::Kind::Uniform:
        for (int64_t i = 0; i < n; ++i)
          store(i, init.a + (init.b - init.a) * philoxUniform(init.seed, 0, static_cast<uint64_t>(i)));
        break;
      case ir::Initializer::Kind::Normal:
        for (int64_t i = 0; i < n; ++i) store(i, init.a + init.b * philoxNormal(init.seed, 0, static_cast<uint64_t>(i)));
        break;
    }
  };
  // f32 (nearly every parameter) is stored directly; the value is the same double rounded once.
  if (type.dtype == DType::f32) {
    float* out = static_cast<float*>(t.data());
    fill([out](int64_t i, double v) { out[i] = static_cast<float>(v); });
  } else {
    fill([&t](int64_t i, double v) { t.set(i, v); });
  }
  return t;
}

TensorMap initializeParams(const ir::Graph& graph) {
  TensorMap out;
  for (const ir::Param& p : graph.params()) out.insert_or_assign(p.value->name, initialize(p));
  return out;
}

TensorMap sampleInputs(const ir::Graph& graph, uint64_t seed) {
  int64_t classes = 2;
  if (const ir::Output* o = graph.findOutput("logits")) classes = o->value->type.shape.back();
  TensorMap in;
  for (const ir::Value* v : graph.inputs()) {
    rt::HostTensor t(v->type.dtype, v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float u = philoxUniform(seed, 0, static_cast<uint64_t>(i));
      t.set(i, isFloat(v->type.dtype) ? 2 * u - 1 : std::floor(u * static_cast<float>(classes)));
    }
    if (v->name == "lr") t.set(0, 1e-3);
    in.emplace(v->name, std::move(t));
    ++seed;
  }
  return in;
}

}  // namespace kiln::interp
