#include "GradCheck.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Decompose.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::gradcheck {

using ir::OpKind;
using ir::Value;

Arg arg(HostTensor v) {
  bool wrt = isFloat(v.dtype());
  return {std::move(v), wrt};
}
Arg fixed(HostTensor v) { return {std::move(v), false}; }

bool hasGradientRule(OpKind op) {
  for (const passes::NoGradient& n : passes::opsWithoutGradient())
    if (n.op == op) return false;
  return true;
}

namespace {

std::string inputName(size_t i) { return fmt::format("x{}", i); }

struct Case {
  ir::Graph graph{"gradcheck"};
  std::vector<Value*> inputs;
  Value* loss = nullptr;
};

// Inputs x0.. from the args, the user's computation, then R and the weighted-sum loss.
Case buildCase(const std::vector<Arg>& args, const Build& build, HostTensor& weights) {
  Case c;
  for (size_t i = 0; i < args.size(); ++i)
    c.inputs.push_back(c.graph.addInput(inputName(i), {args[i].value.dtype(), args[i].value.shape()}));
  Value* y = build(c.graph, c.inputs);
  if (y->type.dtype != DType::f64)
    throw Error(fmt::format("the checked result must be f64, not {}", y->type.str()));
  Value* r = c.graph.addInput("R", y->type);
  // Fixed per result size, so a case reruns identically; values in ±[0.5, 1.5] so no output
  // element is nearly ignored.
  Rng rng(0x5eed0000u + static_cast<uint64_t>(y->type.numel()));
  weights = rng.awayFromZero(y->type.shape, 0.5, 1.5);
  Value* weighted = c.graph.addNode(OpKind::Mul, {y, r}, {});
  std::vector<ir::NamedAttr> all = {{"axes", ir::Ints{}}};
  c.loss = c.graph.addNode(OpKind::ReduceSum, {weighted}, all, {}, "loss");
  c.graph.addOutput("loss", c.loss);
  bool composite = std::any_of(c.graph.nodes().begin(), c.graph.nodes().end(),
                               [](const auto& n) { return n->info().has(ir::kComposite); });
  if (composite) {
    // decompose may rebuild the graph: find the values again by name.
    passes::decompose(c.graph);
    c.loss = c.graph.findOutput("loss")->value;
    for (size_t i = 0; i < args.size(); ++i) c.inputs[i] = c.graph.findValue(inputName(i));
  }
  return c;
}

double lossOf(const ir::Graph& forward, const interp::TensorMap& feed) {
  return interp::runPrimitives(forward, feed, {}).at("loss").at(0);
}

std::string describeArgs(const std::vector<Arg>& args) {
  std::vector<std::string> types;
  for (size_t i = 0; i < args.size(); ++i) types.push_back(fmt::format("x{}: {}", i, args[i].value.typeStr()));
  return fmt::format("{}", fmt::join(types, ", "));
}

Outcome runCheck(std::string_view label, const std::vector<Arg>& args, const Build& build, const Tolerance& tol) {
  Outcome outcome;
  HostTensor weights;
  Case c = buildCase(args, build, weights);
  ir::Graph forward = c.graph.clone();

  std::vector<Value*> wrt;
  std::vector<size_t> wrtIndex;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].wrt) {
      wrt.push_back(c.inputs[i]);
      wrtIndex.push_back(i);
    }
  passes::GradientResult grads = passes::appendGradients(c.graph, c.loss, wrt);
  if (grads.grads.size() != wrt.size())
    throw Error(fmt::format("appendGradients returned {} gradients for {} values", grads.grads.size(), wrt.size()));
  for (size_t k = 0; k < wrt.size(); ++k) c.graph.addOutput("grad." + inputName(wrtIndex[k]), grads.grads[k]);
  std::vector<std::string> problems = ir::verifyGraph(c.graph);
  if (!problems.empty())
    throw Error(fmt::format("the graph with gradients does not verify:\n{}\n{}", fmt::join(problems, "\n"),
                            ir::printGraph(c.graph)));

  interp::TensorMap feed;
  for (size_t i = 0; i < args.size(); ++i) feed[inputName(i)] = args[i].value;
  feed["R"] = weights;
  interp::TensorMap analytic = interp::runPrimitives(c.graph, feed, {});
  outcome.ran = true;

  for (size_t k = 0; k < wrt.size(); ++k) {
    size_t i = wrtIndex[k];
    std::string what = fmt::format("{}: d loss / d x{} ({})", label, i, args[i].value.typeStr());
    const HostTensor& g = analytic.at("grad." + inputName(i));
    if (g.dtype() != args[i].value.dtype() || g.shape() != args[i].value.shape()) {
      ADD_FAILURE() << what << ": the gradient has type " << g.typeStr();
      ++outcome.mismatches;
      continue;
    }
    std::string details;
    int bad = 0;
    double worst = 0;
    for (int64_t e = 0; e < g.numel(); ++e) {
      interp::TensorMap shifted = feed;
      HostTensor& x = shifted[inputName(i)];
      double x0 = args[i].value.at(e);
      x.set(e, x0 + tol.h);
      double up = lossOf(forward, shifted);
      x.set(e, x0 - tol.h);
      double down = lossOf(forward, shifted);
      double numeric = (up - down) / (2 * tol.h);
      double a = g.at(e), err = std::abs(a - numeric);
      if (std::isnan(err)) err = INFINITY;
      worst = std::max(worst, err);
      if (!(err <= tol.atol + tol.rtol * std::abs(numeric))) {
        if (++bad <= 6) details += fmt::format("\n  element {}: analytic {:.10g}, numeric {:.10g}", e, a, numeric);
      }
    }
    outcome.maxAbsError = std::max(outcome.maxAbsError, worst);
    outcome.mismatches += bad;
    if (bad > 0)
      ADD_FAILURE() << what << ": " << bad << " of " << g.numel()
                    << " elements differ from central differences (max |error| " << fmt::format("{:.3g}", worst)
                    << ", allowed " << tol.atol << " + " << tol.rtol << " |numeric|)" << details
                    << "\n  operands: " << describeArgs(args);
  }
  return outcome;
}

}  // namespace

Outcome checkGradients(std::string_view label, std::vector<Arg> args, const Build& build, Tolerance tol) {
  try {
    return runCheck(label, args, build, tol);
  } catch (const Error& e) {
    ADD_FAILURE() << label << " (" << describeArgs(args) << "): " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << " (" << describeArgs(args) << "): unexpected exception: " << e.what();
  }
  return {};
}

Outcome checkOp(std::string_view label, OpKind op, std::vector<Arg> args, std::vector<ir::NamedAttr> attrs,
                Tolerance tol) {
  auto build = [op, attrs = std::move(attrs)](ir::Graph& g, std::span<Value* const> in) {
    return g.addNode(op, std::vector<Value*>(in.begin(), in.end()), attrs);
  };
  return checkGradients(fmt::format("{} {}", ir::opName(op), label), std::move(args), build, tol);
}

// ---- Rng ---------------------------------------------------------------------------------------

double Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int64_t Rng::below(int64_t n) { return std::min<int64_t>(n - 1, static_cast<int64_t>(next() * n)); }

HostTensor Rng::uniform(const ir::Shape& shape, double lo, double hi) {
  HostTensor t(DType::f64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, lo + (hi - lo) * next());
  return t;
}

HostTensor Rng::positive(const ir::Shape& shape, double lo, double hi) { return uniform(shape, lo, hi); }

HostTensor Rng::awayFromZero(const ir::Shape& shape, double lo, double hi) {
  HostTensor t = uniform(shape, lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (next() < 0.5) t.set(i, -t.at(i));
  return t;
}

std::vector<HostTensor> Rng::distinct(const std::vector<ir::Shape>& shapes, double lo, double hi) {
  int64_t n = 0;
  for (const ir::Shape& s : shapes) n += ir::numElements(s);
  // A shuffled grid with jitter below half a cell: neighbours stay (hi-lo)/(2n) apart.
  std::vector<int64_t> slot(static_cast<size_t>(n));
  std::iota(slot.begin(), slot.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(slot[static_cast<size_t>(i)], slot[static_cast<size_t>(below(i + 1))]);
  double cell = (hi - lo) / static_cast<double>(std::max<int64_t>(n, 1));
  std::vector<HostTensor> out;
  size_t k = 0;
  for (const ir::Shape& s : shapes) {
    HostTensor t(DType::f64, s);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, lo + cell * (static_cast<double>(slot[k++]) + 0.25 + 0.5 * next()));
    out.push_back(std::move(t));
  }
  return out;
}

HostTensor Rng::distinct(const ir::Shape& shape, double lo, double hi) {
  return distinct(std::vector<ir::Shape>{shape}, lo, hi)[0];
}

HostTensor Rng::indices(const ir::Shape& shape, int64_t n, DType dtype) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(below(n)));
  return t;
}

HostTensor Rng::mask(const ir::Shape& shape) {
  HostTensor t(DType::boolean, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, next() < 0.5 ? 1 : 0);
  return t;
}

HostTensor f64(const ir::Shape& shape, const std::vector<double>& values) {
  return HostTensor::fromDoubles(DType::f64, shape, values);
}
HostTensor i64(const ir::Shape& shape, const std::vector<double>& values) {
  return HostTensor::fromDoubles(DType::i64, shape, values);
}

}  // namespace kiln::gradcheck
