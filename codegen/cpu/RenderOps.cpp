// The op kernels (RenderOps.h), built with OpEmitter (OpEmitter.h). Each op is a loop over
// independent work items — rows of the result, output rows of a pooling, planes — that never write
// the same element, so the kernel function runs the item loop itself when the whole kernel is small
// and hands it to kiln_parallel_for in chunks of at least kParallelWork elements otherwise. Inside an
// item, runs of contiguous elements are explicit vectors of the ISA's width with a scalar tail:
//
//   one_hot        lanes along the classes: (c + lane) == index
//   argmax/argmin  lanes along the columns after the axis (each lane its own scan); a scan along the
//                  last axis is scalar
//   scatter_add    lanes along the contiguous columns of each update row; items are (outer index,
//                  block of columns), each adding all updates into its columns in order
//   random         lanes along the elements: Philox on 64-bit lanes (PhiloxIR.h)
//   pooling        RenderPool.cpp
//
// Copies (gather, concat, slice_grad) are memcpy/memset of whole rows, byte-exact like the
// interpreter's. argmax/argmin follow the interpreter's rules (interp/EvalReduce.cpp): the first
// extreme wins ties, and the first NaN wins outright.
#include "codegen/cpu/RenderOps.h"

#include "codegen/cpu/Elements.h"
#include "codegen/cpu/OpEmitter.h"
#include "codegen/cpu/PhiloxIR.h"
#include "support/Error.h"

#include <llvm/IR/Module.h>

namespace kiln::cpu {
namespace {

using ir::OpKind;
using namespace opkernels;

int64_t product(const ir::Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

// ---- movement ------------------------------------------------------------------------------------

/// Row o of the result is row o of every operand, one after the other (rows: the dimensions from
/// the axis on).
llvm::Function* emitConcat(OpEmitter& e) {
  const ir::TensorType& out = e.outType();
  auto axis = static_cast<size_t>(ir::normalizeAxis(e.node().attrInt("axis"), out.rank()));
  int64_t outer = product(out.shape, 0, axis), tail = product(out.shape, axis + 1, out.shape.size());
  int64_t row = out.shape[axis] * tail;
  return e.emit(outer, row, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* o) {
      int64_t offset = 0;
      for (size_t i = 0; i < e.node().operands.size(); ++i) {
        int64_t len = e.inType(i).shape[axis] * tail;
        if (len > 0) e.copy(e.out(), e.add(e.mul(o, row), offset), e.in(i), e.mul(o, len), out.dtype, e.i64(len));
        offset += len;
      }
    });
  });
}

/// out[o, j, :] = data[o, indices[j], :]; zeros for an index outside [0, dim).
llvm::Function* emitGather(OpEmitter& e) {
  const ir::TensorType &data = e.inType(0), &indices = e.inType(1);
  auto axis = static_cast<size_t>(ir::normalizeAxis(e.node().attrInt("axis"), data.rank()));
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis];
  int64_t inner = product(data.shape, axis + 1, data.shape.size()), count = indices.numel();
  DType t = data.dtype;
  return e.emit(outer * count, inner, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* r) {
      Value* index = e.load(e.in(1), indices.dtype, e.rem(r, count));
      Value* dst = e.mul(r, inner);
      Value* src = e.mul(e.add(e.mul(e.div(r, count), dim), index), inner);
      e.when(
          e.b.CreateICmpULT(index, e.i64(dim)), [&] { e.copy(e.out(), dst, e.in(0), src, t, e.i64(inner)); },
          [&] { e.zero(e.out(), t, dst, e.i64(inner)); });
    });
  });
}

/// Zeros of the result, then out[o, indices[j], :] += updates[o, j, :] in the order of j; indices
/// outside [0, dim) are skipped. Work items are (o, block of columns), so no two items add into
/// the same element.
llvm::Function* emitScatterAdd(OpEmitter& e) {
  const ir::TensorType &indices = e.inType(0), &updates = e.inType(1);
  auto axis = static_cast<size_t>(e.node().attrInt("axis"));
  int64_t dim = e.node().attrInt("dim_size"), count = indices.numel();
  int64_t outer = product(updates.shape, 0, axis);
  int64_t inner = product(updates.shape, axis + static_cast<size_t>(indices.rank()), updates.shape.size());
  DType t = updates.dtype, acc = sumType(t);
  int lanes = e.lanesFor(t);
  int64_t block = std::min<int64_t>(inner, 16 * lanes), blocks = block == 0 ? 0 : (inner + block - 1) / block;
  return e.emit(outer * blocks, (count + dim) * block, acc != t, [&](Value* begin, Value* end) {
    Value* sums = acc == t ? e.out() : e.scratch();
    e.loop(begin, end, [&](Value* item) {
      Value* o = e.div(item, blocks);
      Value* c0 = e.mul(e.rem(item, blocks), block);
      Value* c1 = e.min(e.add(c0, block), e.i64(inner));
      Value* outBase = e.mul(o, dim * inner);
      if (blocks == 1)
        e.zero(sums, acc, outBase, e.i64(dim * inner));
      else
        e.loop(e.i64(0), e.i64(dim), [&](Value* d) {
          e.zeroShort(sums, acc, e.add(outBase, e.add(e.mul(d, inner), c0)), e.sub(c1, c0));
        });
      e.loop(e.i64(0), e.i64(count), [&](Value* j) {
        Value* index = e.load(e.in(0), indices.dtype, j);
        e.when(e.b.CreateICmpULT(index, e.i64(dim)), [&] {
          Value* dst = e.add(outBase, e.mul(index, inner));
          Value* src = e.mul(e.add(e.mul(o, count), j), inner);
          e.forLanes(c0, c1, lanes, [&](Value* c, int n) {
            Value* x = convert(e.b, t, acc, e.load(e.in(1), t, e.add(src, c), n));
            Value* at = e.add(dst, c);
            e.store(sums, acc, at, addIn(e.b, acc, e.load(sums, acc, at, n), x));
          }, Unroll::Allowed);
        });
      });
      if (acc != t)
        e.loop(e.i64(0), e.i64(dim), [&](Value* d) {
          Value* row = e.add(outBase, e.mul(d, inner));
          e.forLanes(e.add(row, c0), e.add(row, c1), lanes, [&](Value* i, int n) {
            e.store(e.out(), t, i, convert(e.b, acc, t, e.load(sums, acc, i, n)));
          }, Unroll::Allowed);
        });
    });
  });
}

/// out[i, c] = indices[i] == c.
llvm::Function* emitOneHot(OpEmitter& e) {
  const ir::TensorType& indices = e.inType(0);
  DType t = e.outType().dtype;
  int64_t classes = e.node().attrInt("num_classes");
  int lanes = e.lanesFor(t);
  return e.emit(indices.numel(), classes, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* i) {
      Value* index = e.load(e.in(0), indices.dtype, i);
      Value* row = e.mul(i, classes);
      e.forLanes(e.i64(0), e.i64(classes), lanes, [&](Value* c, int n) {
        Value* hit = e.b.CreateICmpEQ(e.laneIndices(c, n), splat(e.b, index, n));
        e.store(e.out(), t, e.add(row, c), e.b.CreateSelect(hit, constant(e.b, t, 1, n), constant(e.b, t, 0, n)));
      }, Unroll::Allowed);
    });
  });
}

/// slice_grad: dy placed into zeros of the result's shape at starts + c·steps, one item per result
/// row. Trailing dimensions that dy covers whole merge into the row (up to kMaxRow elements) while
/// the dimension before them is sliced with step 1, so a slice along a leading axis copies long
/// contiguous runs.
llvm::Function* emitSliceGrad(OpEmitter& e) {
  constexpr int64_t kMaxRow = 4096;
  const ir::TensorType &dy = e.inType(0), &out = e.outType();
  const ir::Ints &starts = e.node().attrInts("starts"), &steps = e.node().attrInts("steps");
  DType t = out.dtype;
  struct Dim {
    int64_t size, start, step, count;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < out.shape.size(); ++d) dims.push_back({out.shape[d], starts[d], steps[d], dy.shape[d]});
  if (dims.empty()) dims.push_back({1, 0, 1, 1});
  while (dims.size() >= 2) {
    const Dim &last = dims.back(), &prev = dims[dims.size() - 2];
    bool whole = last.start == 0 && last.step == 1 && last.count == last.size;
    if (!whole || prev.step != 1 || prev.size * last.size > kMaxRow) break;
    Dim merged = {prev.size * last.size, prev.start * last.size, 1, prev.count * last.size};
    dims.pop_back();
    dims.back() = merged;
  }
  const Dim row = dims.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d].size;
  return e.emit(row.size == 0 ? 0 : rows, row.size, false, [&](Value* begin, Value* end) {
    e.loop(begin, end, [&](Value* r) {
      // The row's coordinates, whether each is one the slice took, and the row of dy it took.
      Value* hit = e.b.getTrue();
      Value* dyRow = e.i64(0);
      Value* rest = r;
      int64_t dyStride = 1;
      for (size_t d = dims.size() - 1; d-- > 0;) {
        Value* offset = e.sub(e.rem(rest, dims[d].size), e.i64(dims[d].start));
        rest = e.div(rest, dims[d].size);
        Value* at = e.div(offset, dims[d].step);
        hit = e.b.CreateAnd(hit, e.b.CreateICmpSGE(offset, e.i64(0)));
        hit = e.b.CreateAnd(hit, e.b.CreateICmpEQ(e.rem(offset, dims[d].step), e.i64(0)));
        hit = e.b.CreateAnd(hit, e.b.CreateICmpSLT(at, e.i64(dims[d].count)));
        dyRow = e.add(dyRow, e.mul(at, dyStride));
        dyStride *= dims[d].count;
      }
      Value* dst = e.mul(r, row.size);
      Value* src = e.mul(dyRow, row.count);
      e.when(
          hit,
          [&] {
            if (row.step == 1) {
              e.zero(e.out(), t, dst, e.i64(row.start));
              e.copy(e.out(), e.add(dst, row.start), e.in(0), src, t, e.i64(row.count));
              e.zero(e.out(), t, e.add(dst, row.start + row.count), e.i64(row.size - row.start - row.count));
              return;
            }
            e.zero(e.out(), t, dst, e.i64(row.size));
            e.loop(e.i64(0), e.i64(row.count), 1, {}, [&](Value* c, const Carried&) {
              Value* at = e.add(dst, e.add(e.mul(c, row.step), row.start));
              e.storeRaw(e.out(), t, at, e.loadRaw(e.in(0), t, e.add(src, c), 1));
              return Carried{};
            }, Unroll::Allowed);
          },
          [&] { e.zero(e.out(), t, dst, e.i64(row.size)); });
    });
  });
}

// ---- reductions and sources ------------------------------------------------------------------

/// The index of the first maximum (minimum) along the axis, a NaN counting as the extreme: a
/// later element replaces the best only while the best is not NaN and it is NaN or strictly
/// better. Lanes run along the columns after the axis.
llvm::Function* emitArgReduce(OpEmitter& e) {
  const ir::TensorType& x = e.inType(0);
  bool largest = e.node().op == OpKind::ArgMax;
  auto axis = static_cast<size_t>(ir::normalizeAxis(e.node().attrInt("axis"), x.rank()));
  int64_t outer = product(x.shape, 0, axis), len = x.shape[axis], inner = product(x.shape, axis + 1, x.shape.size());
  DType t = x.dtype;
  return e.emit(outer, len * inner, false, [&](Value* begin, Value* end) {
    auto& b = e.b;
    e.loop(begin, end, [&](Value* o) {
      e.forLanes(e.i64(0), e.i64(inner), e.lanesFor(t), [&](Value* c, int n) {
        Value* first = e.add(e.mul(o, len * inner), c);
        Carried best = e.loop(e.i64(1), e.i64(len), 1, {e.load(e.in(0), t, first, n), splat(b, e.i64(0), n)},
                              [&](Value* j, const Carried& acc) {
          Value* v = e.load(e.in(0), t, e.add(first, e.mul(j, inner)), n);
          Value* take;
          if (isFloat(t))
            take = b.CreateAnd(b.CreateFCmpORD(acc[0], acc[0]),
                               largest ? b.CreateFCmpUGT(v, acc[0]) : b.CreateFCmpULT(v, acc[0]));
          else
            take = largest ? b.CreateICmpSGT(v, acc[0]) : b.CreateICmpSLT(v, acc[0]);
          return Carried{b.CreateSelect(take, v, acc[0]), b.CreateSelect(take, splat(b, j, n), acc[1])};
        }, Unroll::Allowed);
        e.store(e.out(), DType::i64, e.add(e.mul(o, inner), c), best[1]);
      });
    });
  });
}

/// Philox draws for elements [begin, end) at the step the operand holds (0 without one).
llvm::Function* emitRandom(OpEmitter& e) {
  const ir::Node& n = e.node();
  DType t = e.outType().dtype;
  auto seed = static_cast<uint64_t>(n.attrInt("seed")), offset = static_cast<uint64_t>(n.attrInt("offset"));
  bool normal = n.attrStr("dist") == "normal";
  // A draw costs about as much as touching 16 elements.
  return e.emit(e.outType().numel(), 16, false, [&](Value* begin, Value* end) {
    Value* step = n.operands.empty() ? e.i64(0) : e.load(e.in(0), n.operands[0]->type.dtype, e.i64(0));
    e.forLanes(begin, end, e.lanesFor(DType::f32), [&](Value* i, int lanes) {
      // offset + index wraps like the interpreter's uint64 counter.
      Value* counter = e.laneIndices(e.b.CreateAdd(i, e.i64(static_cast<int64_t>(offset))), lanes);
      e.store(e.out(), t, i, convert(e.b, DType::f32, t, emitPhiloxDraw(e.b, seed, counter, step, normal)));
    });
  });
}

using EmitFn = llvm::Function* (*)(OpEmitter&);

struct OpKernelEmitter {
  OpKind op;
  EmitFn emit;
};

constexpr OpKernelEmitter kEmitters[] = {
    {OpKind::Concat, emitConcat},          {OpKind::Gather, emitGather},
    {OpKind::ScatterAdd, emitScatterAdd},  {OpKind::OneHot, emitOneHot},
    {OpKind::SliceGrad, emitSliceGrad},    {OpKind::ArgMax, emitArgReduce},
    {OpKind::ArgMin, emitArgReduce},       {OpKind::Random, emitRandom},
    {OpKind::MaxPool2d, emitPool},         {OpKind::AvgPool2d, emitPool},
    {OpKind::MaxPool2dGrad, emitMaxPoolGrad}, {OpKind::AvgPool2dGrad, emitAvgPoolGrad},
};

}  // namespace

llvm::Function* renderOpKernel(llvm::Module& m, const kernels::Kernel& k, const VectorIsa& isa) {
  KILN_CHECK(k.op, "kernel '{}' is not an op kernel", k.name);
  for (const OpKernelEmitter& entry : kEmitters)
    if (entry.op == k.op->op) {
      OpEmitter e(m, k, isa);
      return entry.emit(e);
    }
  KILN_THROW("kernel '{}': the CPU backend has no op kernel for '{}'", k.name, ir::opName(k.op->op));
}

int64_t opKernelScratchBytes(const kernels::Kernel& k) {
  if (!k.op || k.outputs.empty()) return 0;
  const ir::TensorType& out = k.buffers[k.outputs[0]].type;
  if (sumType(out.dtype) == out.dtype) return 0;
  bool sums = k.op->op == OpKind::ScatterAdd || (k.op->op == OpKind::MaxPool2dGrad && poolWindowsOverlap(*k.op));
  return sums ? out.numel() * static_cast<int64_t>(sizeof(float)) : 0;
}

}  // namespace kiln::cpu
