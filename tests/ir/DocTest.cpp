// docs/IR.md must document every op in ir/Ops.def, so the reference cannot silently fall behind.
#include "ir/OpInfo.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace kiln::ir {
namespace {

std::string readDoc() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/IR.md");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Docs, EveryOpHasARowInTheReference) {
  std::string doc = readDoc();
  ASSERT_FALSE(doc.empty()) << "cannot read docs/IR.md";
  for (const OpInfo& info : allOps()) {
    std::string row = fmt::format("\n| `{}` |", info.name);
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/IR.md has no op reference row for '" << info.name << "'";
    for (const AttrSpec& a : info.attrs)
      EXPECT_NE(doc.find(fmt::format("`{}`", a.name)), std::string::npos)
          << "docs/IR.md does not mention attribute '" << a.name << "' of '" << info.name << "'";
  }
}

}  // namespace
}  // namespace kiln::ir
