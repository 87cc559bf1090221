// CUDA C++ for the scalar part of a loop nest (kernels/Kernel.h): index maps, loads with bounds
// and padding, the expression DAG and stores. Every kernel renderer of the CUDA backend (nests,
// contraction epilogues) emits its per-point code through this class, so the semantics live in one
// place and every elementwise primitive is one device function of the prelude (Prelude.h):
//
//   Expr::Op       kiln_<opname>(args…) (ir::opName: kiln_add, kiln_sigmoid, …), overloaded on the
//                  compute types, then rounded to the result dtype (kiln_round_f16 / _bf16 / _i32);
//                  cast is kiln_cast_<to dtype>(x) (kiln_cast_f16, kiln_cast_i32, …), select is
//                  kiln_select(c, a, b)
//   Expr::Load     kiln_ld(b<buffer>[index]) where every bound holds, else the pad value
//   Expr::Coord    (index / divisor) % modulus as an i64, converted to the expression's dtype
//   Expr::Random   kiln_philox_uniform / kiln_philox_normal(seed, offset + index, 0), converted
//   Expr::Reduced  the variable the caller bound with setReduced
//   Expr::Acc      the C++ expression the caller bound with setAcc, converted to the expression's
//                  dtype (convertValue: an f32 product rounded to f16, an i64 one wrapped to i32)
//
// Values live in their dtype's *compute type* (computeType): f32, f16 and bf16 in `float` (f16/bf16
// rounded to their type after every op, as the interpreter rounds every result), f64 in `double`,
// i32 and i64 in `long long` (i32 re-wrapped after every op), bool in `bool`. Buffers hold the
// *storage type* (Render.h deviceType): a buffer `i` of the kernel description is the pointer
// variable `b<i>` (bufferVar) in the generated code.
//
// Usage, for one point of a nest (a C++ block of the generated code):
//
//   ExprEmitter e(kernel, nest);          // the nest as rendered (simplified or not)
//   e.setCoord(0, "row"); e.setCoord(1, "col");
//   e.setAcc("acc", DType::f32);          // contraction epilogues: the product at this point
//   e.setReduced(0, "red0");              // reduction nests: finished reduction results
//   std::string code;
//   e.emitStores(/*outer=*/false, code, "    ");   // evaluates what the stores need, then stores
//
// Each expression is evaluated at most once per point: emitted values are remembered until
// resetPoint() (call it whenever the generated code leaves the block the values were declared in,
// and after changing coordinates). Variable names are unique per emitter (`<prefix><counter>`), so
// blocks may nest without shadowing.
#pragma once

#include "kernels/Kernel.h"

#include <string>
#include <vector>

namespace kiln::cuda {

/// The C++ type values of `t` are computed in: "float" (f32, f16, bf16), "double", "long long"
/// (i32, i64) or "bool".
const char* computeType(DType t);

/// A C++ literal of computeType(t) holding `value` rounded to `t` as a store would round it
/// (kiln::roundTo): "1.5f", "-0.0f", "kiln_f32_bits(0x7f800000u)" (non-finite), "3LL", "true".
std::string literal(DType t, double value);

/// The C++ expression converting `expr`, a value of computeType(from), to a value of `to`: when
/// both share a compute type, the rounding an op result of `to` gets (kiln_round_f16 / _bf16 /
/// _i32, else nothing: f32 products rounded to f16, i64 sums wrapped to i32); otherwise the `cast`
/// op (kiln_cast_<to>).
std::string convertValue(DType from, DType to, const std::string& expr);

/// The name of the pointer variable of kernel buffer `buffer` in generated code: "b3".
std::string bufferVar(int32_t buffer);

/// The parameter list of an entry point taking `buffers` (kernel buffer indices) in order:
/// "float* b0, const __half* b2". `written` buffers are non-const; the rest are `const`.
std::string bufferParams(const kernels::Kernel& k, const std::vector<int32_t>& buffers,
                         const std::vector<int32_t>& written);

/// The accumulator of a reduction: its compute type, identity and combining prelude function.
struct ReductionForm {
  DType accType;         // the body's dtype (its compute type accumulates: f16/bf16 sums in float)
  std::string identity;  // literal: 0, -inf / +inf, or the integer type's extreme
  std::string combine;   // "kiln_add", "kiln_max" or "kiln_min" (NaN-propagating for floats)
};
/// kiln::Error for a reduction the backend cannot compute (a bool body).
ReductionForm reductionForm(const kernels::Kernel& k, const kernels::LoopNest& nest, const kernels::Reduction& r);

/// The C++ expression turning an accumulated value `acc` (compute type of form.accType) into the
/// reduction's result in the compute type of r.dtype (convertValue).
std::string finishReduction(const kernels::Reduction& r, const ReductionForm& form, const std::string& acc);

class ExprEmitter {
 public:
  /// Emits code for `nest` of kernel `k` (both must outlive the emitter). `prefix` starts every
  /// variable name it declares ("v" by default; give nested emitters distinct prefixes).
  ExprEmitter(const kernels::Kernel& k, const kernels::LoopNest& nest, std::string prefix = "v");

  /// Binds domain coordinate `d` to a C++ expression of an integer type (usually a variable).
  void setCoord(size_t d, std::string expr);
  /// Binds Expr::Acc: `expr` is the product at the current point, a value of computeType(accType)
  /// (contraction accumulators are f32 for f16/bf16/f32 products, f64, or i64).
  void setAcc(std::string expr, DType accType);
  /// Binds reduction `r`'s finished result (a value of computeType(reduction.dtype)).
  void setReduced(size_t r, std::string var);

  /// Forgets every emitted value (a new point or a new block).
  void resetPoint();
  /// The values emitted so far, and going back to them: values declared before a loop stay usable
  /// inside it, so a renderer hoists what does not vary in the loop, snapshots, emits the loop
  /// body, then restores the snapshot once the body's block is closed.
  std::vector<std::string> snapshot() const { return memo_; }
  void restore(std::vector<std::string> memo) { memo_ = std::move(memo); }

  /// Emits the declarations evaluating expression `i` (and what it needs that is not yet
  /// emitted) into `out`, each line prefixed by `indent`; returns the variable holding it (of
  /// computeType(exprs[i].dtype)).
  std::string eval(int32_t i, std::string& out, const std::string& indent);

  /// Emits store `s`: its expression, then the write of its value (converted to the buffer's
  /// storage type) at its index map.
  void emitStore(const kernels::Store& s, std::string& out, const std::string& indent);
  /// Emits every store of the nest whose `outer` flag equals `outer`, in order.
  void emitStores(bool outer, std::string& out, const std::string& indent);

  /// The C++ expression of an affine function at the bound coordinates (an `int` expression when
  /// its values fit 32 bits over the domain, else `long long`).
  std::string affine(const kernels::Affine& a) const;
  /// Whether every value of `a` over the nest's domain fits in a 32-bit int.
  bool fits32(const kernels::Affine& a) const;

  const kernels::LoopNest& nest() const { return nest_; }

 private:
  std::string fresh();
  std::string load(const kernels::Load& l, DType t, std::string& out, const std::string& indent);

  const kernels::Kernel& k_;
  const kernels::LoopNest& nest_;
  std::string prefix_;
  int counter_ = 0;
  std::vector<std::string> coords_;
  std::vector<std::string> reduced_;
  std::string acc_;
  DType accType_ = DType::f32;
  std::vector<std::string> memo_;
};

}  // namespace kiln::cuda
