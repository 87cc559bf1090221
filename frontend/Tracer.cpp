#include "frontend/Init.h"
#include "frontend/Tensor.h"
#include "ir/Verifier.h"

namespace kiln {

Tracer& Tensor::tracer() const {
  KILN_CHECK(tracer_ != nullptr, "use of an undefined tensor");
  return *tracer_;
}

const ir::TensorType& Tensor::type() const {
  KILN_CHECK(value_ != nullptr, "use of an undefined tensor");
  return value_->type;
}

int64_t Tensor::size(int64_t d) const {
  int64_t axis = ir::normalizeAxis(d, rank());
  KILN_CHECK(axis >= 0, "dimension {} is out of range for a tensor of type {}", d, str());
  return shape()[static_cast<size_t>(axis)];
}

Tracer::Tracer(std::string graphName, uint64_t seed)
    : graph_(std::make_unique<ir::Graph>(std::move(graphName))), seed_(seed) {}

ir::Graph& Tracer::mutableGraph() {
  KILN_CHECK(graph_ != nullptr, "the tracer was already finished; start a new Tracer");
  return *graph_;
}

const ir::Graph& Tracer::graph() const {
  KILN_CHECK(graph_ != nullptr, "the tracer was already finished; start a new Tracer");
  return *graph_;
}

Tensor Tracer::input(const std::string& name, DType dtype, Shape shape, SrcLoc loc) {
  return Tensor(this, mutableGraph().addInput(name, ir::TensorType{dtype, std::move(shape)}, SourceLoc::from(loc)));
}

Tensor Tracer::parameter(const std::string& name, DType dtype, Shape shape, ir::Initializer init, SrcLoc loc) {
  return Tensor(this, declareParameter(name, ir::TensorType{dtype, std::move(shape)}, init, SourceLoc::from(loc)));
}

ir::Value* Tracer::declareParameter(const std::string& name, ir::TensorType type, ir::Initializer init, SourceLoc loc) {
  return mutableGraph().addParam(name, std::move(type), init, std::move(loc));
}

void Tracer::output(const std::string& name, const Tensor& t, SrcLoc loc) {
  if (!t.defined()) throw Error(SourceLoc::from(loc), fmt::format("output '{}' is an undefined tensor", name));
  if (&t.tracer() != this)
    throw Error(SourceLoc::from(loc), fmt::format("output '{}' was traced by another Tracer", name));
  try {
    mutableGraph().addOutput(name, t.value());
  } catch (const Error& e) {
    throw Error(SourceLoc::from(loc), e.what());
  }
}

ir::Graph Tracer::finish() {
  ir::Graph& g = mutableGraph();
  KILN_CHECK(!g.outputs().empty(), "graph '{}' has no outputs; call Tracer::output before finish()", g.name());
  ir::verifyOrThrow(g);
  ir::Graph result = std::move(g);
  graph_.reset();
  params_.clear();
  return result;
}

uint64_t Tracer::nextRandomSeed() {
  return deriveSeed(seed_, fmt::format("random#{}", randomCounter_++));
}

uint64_t Tracer::claimRandomOffset(const void* stream, uint64_t count) {
  uint64_t& next = randomOffsets_[stream];
  uint64_t offset = next;
  next += count;
  return offset;
}

Tensor Tracer::emit(ir::OpKind op, std::span<const Tensor> operands, std::vector<ir::NamedAttr> attrs,
                    const SrcLoc& loc) {
  std::vector<ir::Value*> values;
  values.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    if (!t.defined())
      throw Error(SourceLoc::from(loc), fmt::format("op '{}': operand {} is an undefined tensor", ir::opName(op), i));
    if (&t.tracer() != this)
      throw Error(SourceLoc::from(loc),
                  fmt::format("op '{}': operand {} was traced by another Tracer", ir::opName(op), i));
    values.push_back(t.value());
  }
  return Tensor(this, mutableGraph().addNode(op, std::move(values), attrs, SourceLoc::from(loc)));
}

Tensor Tracer::scalar(double value, DType dtype, const SrcLoc& loc) {
  return emit(ir::OpKind::Constant, std::span<const Tensor>(),
              {{"shape", ir::Ints{}}, {"dtype", dtype}, {"value", ir::Floats{value}}}, loc);
}

ir::Value* Tracer::lookupParam(const void* slot) const {
  auto it = params_.find(slot);
  return it == params_.end() ? nullptr : it->second;
}

void Tracer::bindParam(const void* slot, ir::Value* v) { params_[slot] = v; }

}  // namespace kiln
