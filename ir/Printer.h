// The .kir text form (grammar in docs/IR.md). print(parse(print(g))) == print(g) for every graph.
#pragma once

#include "ir/Graph.h"

#include <string>

namespace kiln::ir {

struct PrintOptions {
  bool locations = true;  // print loc(...) suffixes
};

std::string printGraph(const Graph& g, const PrintOptions& opts = {});
/// One attribute value in .kir syntax (also used in error messages).
std::string printAttrValue(const AttrValue& v);

}  // namespace kiln::ir
