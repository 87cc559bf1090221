// Parameter updates (`update %p = %v`): the text form, the checks, and cloning.
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::ir;

namespace {
const char* kStep = R"(graph @sgd_step {
  input %x : f32[2]
  input %lr : f32[]
  param %w : f32[2] = zeros
  %0 = mul(%w, %x) : f32[2]
  %1 = reduce_sum(%0) {axes=[]} : f32[]
  %2 = mul(%x, %lr) : f32[2]
  %3 = sub(%w, %2) : f32[2]
  output %loss = %1
  update %w = %3
}
)";

std::string parseError(const std::string& text) {
  try {
    parseGraph(text, "step.kir");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Updates, RoundTripAndClone) {
  Graph g = parseGraph(kStep, "step.kir");
  ASSERT_EQ(g.updates().size(), 1u);
  EXPECT_EQ(g.updates()[0].param->name, "w");
  EXPECT_EQ(printGraph(g), kStep);
  Graph c = g.clone();
  EXPECT_EQ(printGraph(c), kStep);
  EXPECT_NE(c.updates()[0].param, g.updates()[0].param);
  EXPECT_TRUE(verifyGraph(c).empty());
}

TEST(Updates, OnlyParametersOfTheSameTypeOnce) {
  std::string notParam = std::string(kStep).replace(std::string(kStep).find("update %w"), 9, "update %x");
  EXPECT_NE(parseError(notParam).find("step.kir:10:10: update of %x: only parameters can be updated"),
            std::string::npos)
      << parseError(notParam);
  std::string wrongType = std::string(kStep).replace(std::string(kStep).find("= %3\n}"), 4, "= %1");
  EXPECT_NE(parseError(wrongType).find("update of %w: the new value has type f32[], the parameter f32[2]"),
            std::string::npos)
      << parseError(wrongType);
  std::string twice = std::string(kStep).replace(std::string(kStep).find("}\n", std::string(kStep).find("update")),
                                                 2, "  update %w = %0\n}\n");
  EXPECT_NE(parseError(twice).find("parameter %w is updated twice"), std::string::npos) << parseError(twice);
  std::string undefined = std::string(kStep).replace(std::string(kStep).find("= %3\n}"), 4, "= %9");
  EXPECT_NE(parseError(undefined).find("use of undefined value %9"), std::string::npos) << parseError(undefined);
}
