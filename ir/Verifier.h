// The verifier: checks that a graph is well formed — operands defined before use, operand counts,
// attribute kinds and values, result types equal to what the op's shape rule infers, unique names,
// outputs present. Every violation becomes a message naming the op, its operand types and its
// source location.
#pragma once

#include "ir/Graph.h"

#include <string>
#include <vector>

namespace kiln::ir {

/// All violations, in node order (empty when the graph is valid).
std::vector<std::string> verifyGraph(const Graph& g);

/// Throws kiln::Error with every violation, one per line, when the graph is invalid.
void verifyOrThrow(const Graph& g);

}  // namespace kiln::ir
