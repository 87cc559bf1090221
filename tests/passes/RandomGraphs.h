// Small random graphs of primitives for testing that a pass preserves what the reference
// interpreter computes. A graph is a seeded random walk over a pool of f32 values: elementwise
// ops (with broadcasting partners, often the constants 1, 0, -0.0 that simplifications look for),
// cast round trips (f64, f16, bf16, i32), reductions, movement ops and their chains (reshape,
// broadcast, permute, slice), matmuls with transposed operands or transpose flags, repeated
// nodes and all-constant subexpressions. Shapes are small (rank <= 4, dimensions 1..4, often 1)
// so the interpreter runs a graph in microseconds. The same seed always gives the same graph.
#pragma once

#include "interp/Interpreter.h"
#include "ir/Graph.h"

#include <cstdint>

namespace kiln::testing {

struct RandomGraphOptions {
  /// Steps of the walk; each adds one op plus the constants, permutes or casts it needs.
  int steps = 12;
  /// Highest rank of an input (ops may add one leading dimension up to rank 4).
  int64_t maxRank = 3;
  /// Dimensions are drawn from 1..maxDim, a third of them 1.
  int64_t maxDim = 4;
};

/// The graph of `seed`: one to three f32 inputs, the walk, and as outputs the last value, most
/// values nothing else reads, and now and then an input. It verifies.
ir::Graph randomGraph(uint64_t seed, const RandomGraphOptions& options = {});

/// A value for every input of `g` drawn from `seed`: floats uniform in [-2, 2], integers in
/// [0, 4).
interp::TensorMap randomInputs(const ir::Graph& g, uint64_t seed);

}  // namespace kiln::testing
