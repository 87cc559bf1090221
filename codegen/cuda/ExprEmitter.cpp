#include "codegen/cuda/ExprEmitter.h"

#include "codegen/cuda/Render.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace kiln::cuda {

using kernels::Affine;
using kernels::Expr;

const char* computeType(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return "float";
    case DType::f64: return "double";
    case DType::i32:
    case DType::i64: return "long long";
    case DType::boolean: return "bool";
  }
  KILN_ASSERT(false, "unknown dtype");
  return "";
}

namespace {

/// A decimal literal that reads back as exactly `text`'s value, with a '.' or exponent so it is a
/// floating-point literal.
std::string floatingText(std::string text) {
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string intLiteral(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return v < 0 ? fmt::format("({}LL)", v) : fmt::format("{}LL", v);
}

/// The prelude's name of dtype `t` in function names (kiln_cast_f16, kiln_round_bf16).
std::string_view suffix(DType t) { return dtypeName(t); }

}  // namespace

std::string literal(DType t, double value) {
  double v = kiln::roundTo(t, value);
  switch (t) {
    case DType::boolean: return v != 0 ? "true" : "false";
    case DType::i32:
    case DType::i64: return intLiteral(static_cast<int64_t>(v));
    case DType::f64:
      if (!std::isfinite(v)) return fmt::format("kiln_f64_bits(0x{:016x}ull)", std::bit_cast<uint64_t>(v));
      return floatingText(fmt::format("{:.17g}", v));
    default: {
      auto f = static_cast<float>(v);
      if (!std::isfinite(f)) return fmt::format("kiln_f32_bits(0x{:08x}u)", std::bit_cast<uint32_t>(f));
      return floatingText(fmt::format("{:.9g}", f)) + "f";
    }
  }
}

std::string convertValue(DType from, DType to, const std::string& expr) {
  if (std::string_view(computeType(from)) != computeType(to)) return fmt::format("kiln_cast_{}({})", suffix(to), expr);
  switch (to) {
    case DType::f16:
    case DType::bf16:
    case DType::i32: return fmt::format("kiln_round_{}({})", suffix(to), expr);
    default: return expr;
  }
}

std::string bufferVar(int32_t buffer) { return fmt::format("b{}", buffer); }

std::string bufferParams(const kernels::Kernel& k, const std::vector<int32_t>& buffers,
                         const std::vector<int32_t>& written) {
  std::string params;
  for (int32_t b : buffers) {
    KILN_ASSERT(b >= 0 && static_cast<size_t>(b) < k.buffers.size(), "kernel '{}': buffer {} out of range", k.name, b);
    bool isWritten = std::find(written.begin(), written.end(), b) != written.end();
    if (!params.empty()) params += ", ";
    params += fmt::format("{}{}* {}", isWritten ? "" : "const ", deviceType(k.buffers[b].type.dtype), bufferVar(b));
  }
  return params;
}

ReductionForm reductionForm(const kernels::Kernel& k, const kernels::LoopNest& nest, const kernels::Reduction& r) {
  DType t = nest.exprs[r.body].dtype;
  KILN_CHECK(t != DType::boolean, "kernel '{}': the CUDA backend cannot reduce bool values", k.name);
  ReductionForm f{t, "", ""};
  const double inf = std::numeric_limits<double>::infinity();
  switch (r.op) {
    case ir::OpKind::ReduceSum:
      f.identity = literal(t, 0);
      f.combine = "kiln_add";
      break;
    case ir::OpKind::ReduceMax:
    case ir::OpKind::ReduceMin: {
      bool max = r.op == ir::OpKind::ReduceMax;
      f.combine = max ? "kiln_max" : "kiln_min";
      if (isFloat(t)) {
        f.identity = literal(t, max ? -inf : inf);
      } else if (t == DType::i32) {  // the interpreter's identities: the i32 extremes
        f.identity = intLiteral(max ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max());
      } else {
        f.identity = intLiteral(max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
      }
      break;
    }
    default: KILN_THROW("kernel '{}': unknown reduction '{}'", k.name, ir::opName(r.op));
  }
  return f;
}

std::string finishReduction(const kernels::Reduction& r, const ReductionForm& form, const std::string& acc) {
  return convertValue(form.accType, r.dtype, acc);
}

// ---- ExprEmitter ------------------------------------------------------------------------------

ExprEmitter::ExprEmitter(const kernels::Kernel& k, const kernels::LoopNest& nest, std::string prefix)
    : k_(k), nest_(nest), prefix_(std::move(prefix)) {
  coords_.resize(nest.domain.size());
  reduced_.resize(nest.reductions.size());
  memo_.resize(nest.exprs.size());
}

void ExprEmitter::setCoord(size_t d, std::string expr) {
  KILN_ASSERT(d < coords_.size(), "kernel '{}': coordinate {} of a rank-{} domain", k_.name, d, coords_.size());
  coords_[d] = std::move(expr);
}

void ExprEmitter::setAcc(std::string expr, DType accType) {
  acc_ = std::move(expr);
  accType_ = accType;
}

void ExprEmitter::setReduced(size_t r, std::string var) {
  KILN_ASSERT(r < reduced_.size(), "kernel '{}': reduction {} of {}", k_.name, r, reduced_.size());
  reduced_[r] = std::move(var);
}

void ExprEmitter::resetPoint() { std::fill(memo_.begin(), memo_.end(), std::string()); }

std::string ExprEmitter::fresh() { return fmt::format("{}{}", prefix_, counter_++); }

bool ExprEmitter::fits32(const Affine& a) const {
  // Every partial sum is bounded by |constant| + Σ |coeff|·(size - 1).
  double bound = std::abs(static_cast<double>(a.constant));
  for (size_t d = 0; d < a.coeff.size(); ++d)
    bound += std::abs(static_cast<double>(a.coeff[d])) * static_cast<double>(std::max<int64_t>(nest_.domain[d] - 1, 0));
  return bound <= static_cast<double>(std::numeric_limits<int32_t>::max());
}

std::string ExprEmitter::affine(const Affine& a) const {
  bool narrow = fits32(a);
  std::string s;
  for (size_t d = 0; d < a.coeff.size(); ++d) {
    int64_t c = a.coeff[d];
    if (c == 0) continue;
    KILN_ASSERT(!coords_[d].empty(), "kernel '{}': coordinate {} is not bound", k_.name, d);
    std::string x = narrow ? coords_[d] : fmt::format("static_cast<long long>({})", coords_[d]);
    std::string term = c == 1 ? x : fmt::format("{} * {}", x, narrow ? std::to_string(c) : intLiteral(c));
    if (s.empty()) s = term;
    else s += " + " + term;
  }
  if (a.constant != 0 || s.empty()) {
    std::string c = narrow ? std::to_string(a.constant) : intLiteral(a.constant);
    if (a.constant < 0 && narrow) c = "(" + c + ")";
    s = s.empty() ? c : s + " + " + c;
  }
  return "(" + s + ")";
}

std::string ExprEmitter::load(const kernels::Load& l, DType t, std::string& out, const std::string& indent) {
  const kernels::Buffer& buf = k_.buffers[l.buffer];
  KILN_CHECK(buf.type.dtype == t, "kernel '{}': a {} load from {} buffer '{}'", k_.name, dtypeName(t),
             dtypeName(buf.type.dtype), buf.name);
  std::string value = fmt::format("kiln_ld({}[{}])", bufferVar(l.buffer), affine(l.map.index));
  if (l.map.bounds.empty()) return value;
  // 0 <= v < limit as one unsigned comparison.
  std::string inside;
  for (const auto& b : l.map.bounds) {
    bool narrow = fits32(b.value) && b.limit <= std::numeric_limits<int32_t>::max();
    std::string c = narrow ? fmt::format("static_cast<unsigned int>{} < {}u", affine(b.value), b.limit)
                           : fmt::format("static_cast<unsigned long long>{} < {}ull", affine(b.value), b.limit);
    inside += inside.empty() ? c : " && " + c;
  }
  return fmt::format("({}) ? {} : {}", inside, value, literal(t, l.map.padValue));
}

std::string ExprEmitter::eval(int32_t i, std::string& out, const std::string& indent) {
  KILN_ASSERT(i >= 0 && static_cast<size_t>(i) < nest_.exprs.size(), "kernel '{}': expression {} out of range", k_.name, i);
  if (!memo_[i].empty()) return memo_[i];
  const Expr& e = nest_.exprs[i];
  std::string value;
  switch (e.kind) {
    case Expr::Kind::Load: value = load(nest_.loads[e.load], e.dtype, out, indent); break;
    case Expr::Kind::Constant: value = literal(e.dtype, e.value); break;
    case Expr::Kind::Coord: {
      std::string x = fits32(e.index) ? fmt::format("static_cast<long long>({} / {} % {})", affine(e.index), e.divisor, e.modulus)
                                      : fmt::format("({} / {} % {})", affine(e.index), intLiteral(e.divisor), intLiteral(e.modulus));
      value = convertValue(DType::i64, e.dtype, x);
      break;
    }
    case Expr::Kind::Random: {
      std::string draw = fmt::format("kiln_philox_{}({}ull, {}ull + static_cast<unsigned long long>{}, 0ull)",
                                     e.normal ? "normal" : "uniform", e.seed, e.offset, affine(e.index));
      value = convertValue(DType::f32, e.dtype, draw);
      break;
    }
    case Expr::Kind::Reduced:
      KILN_ASSERT(e.reduction >= 0 && static_cast<size_t>(e.reduction) < reduced_.size() && !reduced_[e.reduction].empty(),
                  "kernel '{}': reduction {} is not bound", k_.name, e.reduction);
      memo_[i] = reduced_[e.reduction];
      return memo_[i];
    case Expr::Kind::Acc:
      KILN_ASSERT(!acc_.empty(), "kernel '{}': Acc outside a contraction epilogue", k_.name);
      value = convertValue(accType_, e.dtype, acc_);
      break;
    case Expr::Kind::Op: {
      std::vector<std::string> args;
      for (int32_t a : e.args) args.push_back(eval(a, out, indent));
      if (e.op == ir::OpKind::Cast) {
        KILN_CHECK(args.size() == 1, "kernel '{}': cast with {} operands", k_.name, args.size());
        value = fmt::format("kiln_cast_{}({})", suffix(e.dtype), args[0]);
      } else {
        std::string call = fmt::format("kiln_{}({})", ir::opName(e.op), fmt::join(args, ", "));
        // select picks one of two values of its type: nothing to round.
        value = e.op == ir::OpKind::Select ? call : convertValue(e.dtype, e.dtype, call);
      }
      break;
    }
  }
  std::string name = fresh();
  out += fmt::format("{}const {} {} = {};\n", indent, computeType(e.dtype), name, value);
  memo_[i] = name;
  return name;
}

void ExprEmitter::emitStore(const kernels::Store& s, std::string& out, const std::string& indent) {
  const kernels::Buffer& buf = k_.buffers[s.buffer];
  DType t = nest_.exprs[s.expr].dtype;
  KILN_CHECK(buf.type.dtype == t, "kernel '{}': a {} value stored to {} buffer '{}'", k_.name, dtypeName(t),
             dtypeName(buf.type.dtype), buf.name);
  std::string v = eval(s.expr, out, indent);
  out += fmt::format("{}kiln_st(&{}[{}], {});\n", indent, bufferVar(s.buffer), affine(s.map.index), v);
}

void ExprEmitter::emitStores(bool outer, std::string& out, const std::string& indent) {
  for (const kernels::Store& s : nest_.stores)
    if (s.outer == outer) emitStore(s, out, indent);
}

}  // namespace kiln::cuda
