// The backend-neutral kernel description: what one fused kernel computes, in terms both backends
// render (docs/KERNELS.md). The fuse pass groups nodes (ir::KernelGroup); lowerGraph turns each
// group (and each ungrouped node) into a Kernel:
//
//   buffers      the tensors in memory it reads and writes (graph inputs, parameters,
//                materialized node results, constant data)
//   nests        loop nests: an iteration domain, loads through affine index maps, a scalar
//                expression DAG, reductions over the domain's reduced dimensions, and stores
//   contraction  for a matmul/conv kernel: the contraction, whose result the epilogue nest reads
//   op           for an `op` kernel: the one node with a dedicated implementation
//
// Expression semantics are the IR ops' own (an Expr of kind Op is the elementwise primitive with
// the same attributes), so a kernel computes exactly what its nodes compute in the interpreter.
#pragma once

#include "ir/Graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::kernels {

/// A tensor in memory.
struct Buffer {
  enum class Role : uint8_t { Input, Param, Temp, Output, Constant };
  const ir::Value* value;  // the graph value it holds (for Constant: the constant node's result)
  std::string name;        // the value's printed name, without '%'
  ir::TensorType type;
  Role role = Role::Temp;
};

/// An affine function of the domain coordinates i_d: constant + Σ coeff[d] * i_d.
struct Affine {
  int64_t constant = 0;
  std::vector<int64_t> coeff;  // one per domain dimension
  bool operator==(const Affine&) const = default;
};

/// Where a domain point reads or writes: element `index` of a buffer (row-major flat index), valid
/// only where every bound holds (0 <= bound < limit); elsewhere a load yields `padValue` (padding).
/// Broadcasting is a zero coefficient; permutes, slices and reshapes change the coefficients.
struct IndexMap {
  Affine index;
  struct Bound {
    Affine value;
    int64_t limit;
    bool operator==(const Bound&) const = default;
  };
  std::vector<Bound> bounds;
  double padValue = 0;
  bool operator==(const IndexMap&) const = default;
};

/// One node of a scalar expression DAG; `args` index earlier Exprs of the same nest.
struct Expr {
  enum class Kind : uint8_t {
    Load,      // loads[load]
    Constant,  // `value` as `dtype`
    Coord,     // (index(i) / divisor) % modulus: an iota's coordinate along its axis
    Random,    // Philox draw of counter `offset` + index(i) under `seed` (the `random` op)
    Reduced,   // the result of reductions[reduction] at the current outer point
    Acc,       // the contraction's result at the current point (contraction epilogues)
    Op,        // the elementwise primitive `op` with `attrs` applied to args
  };
  Expr(Kind k, DType t) : kind(k), dtype(t) {}

  Kind kind;
  DType dtype;
  ir::OpKind op = ir::OpKind::Add;       // Kind::Op
  std::vector<ir::AttrValue> attrs;      // Kind::Op (e.g. cast's dtype)
  std::vector<int32_t> args;             // Kind::Op
  int32_t load = -1;                     // Kind::Load
  int32_t reduction = -1;                // Kind::Reduced
  double value = 0;                      // Kind::Constant
  Affine index;                          // Kind::Coord, Kind::Random
  int64_t divisor = 1, modulus = 1;      // Kind::Coord
  uint64_t seed = 0, offset = 0;         // Kind::Random
  bool normal = false;                   // Kind::Random: normal (else uniform)
};

struct Load {
  int32_t buffer;
  IndexMap map;
};

/// A reduction over the nest's reduced dimensions of `body` (an Expr evaluated at every domain
/// point), combined with `op` (reduce_sum, reduce_max or reduce_min semantics), for each outer point.
struct Reduction {
  ir::OpKind op;
  int32_t body;
  DType dtype;  // the result's element type (sums of f16/bf16 accumulate in at least f32)
};

/// Writes `expr` to `buffer` at `map`. An outer store (reduction nests) runs once per outer point,
/// after the reductions; its map has zero coefficients on the reduced dimensions.
struct Store {
  int32_t buffer;
  int32_t expr;
  IndexMap map;
  bool outer = false;
};

/// An iteration domain and what happens at each point. Without reduced dimensions it is a plain
/// loop: every store at every point. With them, for each outer point (the non-reduced
/// coordinates): the reductions in order (a reduction's body may use earlier reductions' results),
/// then the outer stores, then the full stores at every reduced coordinate.
struct LoopNest {
  std::vector<int64_t> domain;
  std::vector<bool> reduced;  // per domain dimension
  std::vector<Load> loads;
  std::vector<Expr> exprs;
  std::vector<Reduction> reductions;
  std::vector<Store> stores;
};

/// A matmul or convolution (ops matmul, conv2d, conv2d_grad_input, conv2d_grad_weight) of two
/// buffers, with the node's attributes; its result (type `result`) is Expr::Kind::Acc in the
/// epilogue nest, whose domain is the result's shape.
///
/// Operand x (a or b) is the tensor of shape `shapeX` whose element at coordinates c is buffer x's
/// element mapX(c) — mapX an index map over the operand's own coordinates. For an operand stored
/// as it is, shapeX is the buffer's shape and mapX its row-major strides; a matmul operand that is
/// a view of its buffer (reshape, permute, slice, broadcast, folded into the kernel by the fuse pass
/// instead of copied) has the view's shape and strides. Its maps have no bounds (no padding).
struct Contraction {
  ir::OpKind op;
  std::vector<ir::AttrValue> attrs;
  int32_t a, b;
  ir::TensorType result;
  ir::Shape shapeA, shapeB;
  IndexMap mapA, mapB;
};

/// The index map of a tensor of `shape` stored as it is: row-major strides over its coordinates
/// (0 for a dimension of size 1, as placing a view gives them).
IndexMap rowMajorMap(const ir::Shape& shape);

struct Kernel {
  std::string name;  // "k3_matmul_add_relu": the step index and the ops it holds
  ir::KernelKind kind = ir::KernelKind::Loop;
  std::vector<Buffer> buffers;
  std::vector<LoopNest> nests;  // loop, reduction: one; multi: one per part; contraction: its epilogue
  bool hasContraction = false;
  Contraction contraction{};
  const ir::Node* op = nullptr;               // kind Op: the node (operands: inputs(), result: outputs()[0])
  std::vector<const ir::Node*> nodes;         // the graph nodes it computes, in order
  std::vector<int32_t> inputs, outputs;       // buffer indices read / written
  double flops = 0;                           // arithmetic operations (a multiply-add counts 2)
  int64_t bytesRead = 0, bytesWritten = 0;    // compulsory traffic: each buffer once
};

/// Movement ops that a kernel folds into index maps instead of computing: reshape, permute,
/// broadcast, slice, pad, stop_gradient.
bool isViewOp(ir::OpKind op);

/// Whether `v` is a view a matmul can read its operand through (Contraction): a chain of view ops
/// other than pad, each expressible as strides, down to a value that is not itself computed by a
/// view or a cheap leaf (an input, a parameter, constant data or any other node's result).
bool isStridedView(const ir::Value& v);

/// One kernel per schedule step of `g` (ir::kernelSteps): fused groups and ungrouped nodes.
/// kiln::Error when a group cannot be expressed (the fuse pass only makes groups that can).
std::vector<Kernel> lowerGraph(const ir::Graph& g);

/// Lowers one step: `nodes` (consecutive, in order) computed as one kernel of `kind`, where
/// `materialized` are the node results that live in memory (ir::materializedResults). Returns an
/// empty string and sets `out`, or the reason the nodes cannot form one such kernel.
std::string tryLower(const ir::Graph& g, const std::vector<const ir::Node*>& nodes, ir::KernelKind kind,
                     const std::unordered_set<const ir::Value*>& materialized, Kernel& out);

/// A readable listing of a kernel (the `--dump` kernels file).
std::string printKernel(const Kernel& k);

}  // namespace kiln::kernels
