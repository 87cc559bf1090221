// Parser for the .kir text form. Errors throw kiln::Error "FILE:LINE:COL: message". The parser
// never crashes on malformed input (it is fuzzed: tests/fuzz). The parsed graph is verified.
#pragma once

#include "ir/Graph.h"

#include <string>
#include <string_view>

namespace kiln::ir {

Graph parseGraph(std::string_view text, std::string_view fileName = "<input>");
/// Reads and parses a file; a missing or unreadable file is a kiln::Error naming it.
Graph parseGraphFile(const std::string& path);

}  // namespace kiln::ir
