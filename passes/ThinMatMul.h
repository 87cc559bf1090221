// Thin matmuls, expanded by the fuse pass before it partitions the graph: a product of depth K ≤ 2
// is too thin for a GEMM kernel — its packing, register tiles and tile epilogues cost more than
// the product, and the kernel runs at a fraction of the memory bandwidth its bytes need
// (simplenet's 10000×2 · 2×256 ReLU-gradient product: 450–520 µs as a contraction, 100–150 µs as
// an elementwise loop). So op(A)·op(B) = Σ_k op(A)[:, k] ⊗ op(B)[k, :], a sum of outer products:
// per k, a column of op(A) ([M, 1]) times a row of op(B) ([1, N]), broadcast, added in k order,
// for f32 and f64 products.
//
// The arithmetic is f64, rounded once to the result type: products of f32 (or f16, bf16) values
// are exact in f64, so the sum is the reference interpreter's matmul (f64 accumulation, one
// rounding) bit for bit, and fusion keeps its promise of changing no result. (An f32 version
// would round each product; the GEMM, with fused multiply-adds in f32, differs from both by a
// rounding.) f16 and bf16 products stay contractions: exact f64 arithmetic with the conversions on
// both sides measured slower than the GEMM there (simplenet's bf16 step: 440 µs as a contraction,
// 740 as f64 outer products). So do products with N ≤ 2 columns: as row dot products they would
// need f64 products too, and widening their whole A measured slower than the GEMM.
//
// Only rank-2 operands; everything after (fusion with the epilogue's elementwise ops, views folded
// into index maps) is the fuse pass's usual work.
#pragma once

#include "ir/Graph.h"

namespace kiln::passes {

/// Rewrites the thin matmuls of `g` as described above (the result keeps the matmul's name and
/// source location); leaves `g` untouched when it has none. Returns how many it rewrote.
int expandThinMatMuls(ir::Graph& g);

}  // namespace kiln::passes
