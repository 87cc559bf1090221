// Internal to the reference interpreter: the evaluator table (OpKind → function) that each op-family
// file fills in, and the small indexing and element-access helpers they share.
//
// Every evaluator receives operands of exactly the node's operand types and returns a tensor of
// exactly the node's result type. Floats are computed in double and rounded by HostTensor::set;
// integers are computed in int64 arithmetic (so i64 stays exact) and wrapped to their width.
#pragma once

#include "interp/Interpreter.h"
#include "ir/ScalarOps.h"

#include <array>
#include <span>
#include <string>
#include <vector>

namespace kiln::interp::detail {

using rt::HostTensor;
using Operands = std::span<const HostTensor* const>;
using EvalFn = HostTensor (*)(const ir::Node& node, Operands operands);

struct EvalTable {
  std::array<EvalFn, ir::kNumOps> fns{};
  void add(ir::OpKind op, EvalFn fn);
};

// One registration function per op family (each lives in its Eval*.cpp file).
void addElementwiseEvaluators(EvalTable& t);
void addReduceEvaluators(EvalTable& t);
void addMovementEvaluators(EvalTable& t);
void addContractionEvaluators(EvalTable& t);
void addWindowEvaluators(EvalTable& t);
void addSourceEvaluators(EvalTable& t);
void addGradEvaluators(EvalTable& t);

/// The evaluator of `op`, or nullptr when there is none (composite ops never have one).
EvalFn findEvaluator(ir::OpKind op);

// ---- helpers shared by the evaluators ----------------------------------------------------------

/// A zero-filled tensor of the node's result type.
HostTensor makeResult(const ir::Node& node);

/// Throws kiln::Error at the node's source location: "op 'gather' with operands (...): message".
[[noreturn]] void failAt(const ir::Node& node, const std::string& message);

/// Exact integer value of element i of an i32, i64 or bool tensor.
int64_t loadInt(const HostTensor& t, int64_t i);
/// Stores v into element i of an i32 (wrapping modulo 2^32), i64 or bool (v != 0) tensor.
void storeInt(HostTensor& t, int64_t i, int64_t v);
/// Copies element `from` of `src` into element `to` of `dst` byte for byte (same dtype).
void copyElement(const HostTensor& src, int64_t from, HostTensor& dst, int64_t to);

/// Wrapping two's-complement arithmetic on int64 (no undefined behaviour on overflow).
using ir::wrapAdd;
using ir::wrapMul;
using ir::wrapSub;

/// Row-major coordinates of linear index `i` in `shape`.
std::vector<int64_t> unravel(int64_t i, const ir::Shape& shape);
/// Linear index of `coords` given row-major `strides`.
int64_t ravel(std::span<const int64_t> coords, std::span<const int64_t> strides);

/// For each element of `out` (row-major), the linear index of the element of a tensor shaped `in`
/// that NumPy broadcasting maps onto it (`in` right-aligned, size-1 dimensions repeated).
std::vector<int64_t> broadcastIndices(const ir::Shape& in, const ir::Shape& out);

/// Attributes such as stride/padding hold one value per spatial dimension; a single value
/// applies to both.
inline int64_t spatial(const ir::Ints& v, size_t i) { return v.size() == 1 ? v[0] : v.at(i); }

}  // namespace kiln::interp::detail
