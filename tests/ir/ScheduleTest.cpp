// Fusion groups (`kernel @k kind { … }`) and memory plans (`plan arena=… { %v at offset }`): the
// text form, the verifier's checks, and cloning.
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::ir;

namespace {
const char* kFused = R"(graph @fused {
  input %x : f32[4,8]
  param %w : f32[8,3] = zeros
  param %b : f32[3] = zeros
  kernel @k0 contraction {
    # add: bias epilogue of the matmul
    %0 = matmul(%x, %w) : f32[4,3]
    %1 = add(%0, %b) : f32[4,3]
  }
  kernel @k1 reduction {
    %2 = reduce_max(%1) {axes=[1], keepdim=true} : f32[4,1]
    %3 = sub(%1, %2) : f32[4,3]
  }
  %4 = exp(%3) : f32[4,3]
  output %y = %4
  plan arena=128 align=64 {
    %1 at 0
    %3 at 64
  }
}
)";

std::string parseError(const std::string& text) {
  try {
    parseGraph(text, "fused.kir");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}
}  // namespace

TEST(Schedule, RoundTripAndClone) {
  Graph g = parseGraph(kFused, "fused.kir");
  ASSERT_EQ(g.groups().size(), 2u);
  EXPECT_EQ(g.groups()[0].name, "k0");
  EXPECT_EQ(g.groups()[0].kind, KernelKind::Contraction);
  EXPECT_EQ(g.nodes()[1]->group, 0);
  EXPECT_EQ(g.nodes()[4]->group, -1);
  ASSERT_NE(g.plan(), nullptr);
  EXPECT_EQ(g.plan()->arenaBytes, 128);
  ASSERT_EQ(g.plan()->slots.size(), 2u);
  EXPECT_EQ(g.plan()->slots[1].offset, 64);
  // Comments are not kept by the parser, so the notes line is what differs.
  EXPECT_EQ(printGraph(g), replaced(kFused, "    # add: bias epilogue of the matmul\n", ""));
  g.mutableGroups()[0].notes.push_back("add: bias epilogue of the matmul");
  EXPECT_EQ(printGraph(g), kFused);
  Graph c = g.clone();
  EXPECT_EQ(printGraph(c), kFused);
  EXPECT_NE(c.plan()->slots[0].value, g.plan()->slots[0].value);
  c.clearSchedule();
  EXPECT_TRUE(c.groups().empty());
  EXPECT_EQ(c.plan(), nullptr);
  EXPECT_TRUE(verifyGraph(c).empty());
}

TEST(Schedule, ParseErrors) {
  EXPECT_NE(parseError(replaced(kFused, "@k1 reduction", "@k0 reduction")).find("duplicate kernel @k0"),
            std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "@k1 reduction", "@k1 fancy")).find("expected a kernel kind"),
            std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "  %4 = exp", "  kernel @k2 loop {\n  }\n  %4 = exp")).find("has no nodes"),
            std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "  }\n  %4", "  output %z = %3\n  }\n  %4")).find("inside kernel @k1"),
            std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "%3 at 64", "%3 at 32")).find("not 64-byte aligned"), std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "%3 at 64", "%3 at 128")).find("outside the arena"), std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "%3 at 64", "%x at 64")).find("%x is not a node result"),
            std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "%3 at 64", "%1 at 64")).find("%1 is placed twice"), std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "align=64", "align=48")).find("not a power of two"), std::string::npos);
  EXPECT_NE(parseError(replaced(kFused, "%3 at 64", "%3 64")).find("expected 'at'"), std::string::npos);
}

TEST(Schedule, VerifierRejectsScatteredGroups) {
  Graph g = parseGraph(kFused, "fused.kir");
  g.mutableNodes()[4]->group = 0;  // the exp joins @k0, after @k1's nodes
  std::vector<std::string> problems = verifyGraph(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("the nodes of kernel @k0 are not consecutive"), std::string::npos) << problems[0];
  g.mutableNodes()[4]->group = 7;
  problems = verifyGraph(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("kernel group 7 does not exist"), std::string::npos) << problems[0];
}
