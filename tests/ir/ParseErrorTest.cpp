// Malformed .kir text: each error names FILE:LINE:COL of the offending token and says what was
// expected and what was found. The expected diagnostic is written next to the input.
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::ir {
namespace {

// The whole message for a graph body (the lines between `graph @g {` on line 1 and `}`).
std::string errorOf(const std::string& text) {
  try {
    parseGraph(text, "t.kir");
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
std::string bodyError(const std::string& body) { return errorOf("graph @g {\n" + body + "}\n"); }

const char* kX = "  input %x : f32[2,3]\n";  // line 2

TEST(ParseError, UnknownOp) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = frobnicate(%x) : f32[2,3]\n"), "t.kir:3:8: unknown op 'frobnicate'");
}

TEST(ParseError, UndefinedValue) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = add(%x, %foo) : f32[2,3]\n"), "t.kir:3:16: use of undefined value %foo");
  EXPECT_EQ(bodyError(std::string(kX) + "  output %out = %nope\n"), "t.kir:3:17: use of undefined value %nope");
}

TEST(ParseError, UseBeforeDefinition) {
  EXPECT_EQ(bodyError("  %y = neg(%x) : f32[2,3]\n" + std::string(kX)), "t.kir:2:12: use of undefined value %x");
}

TEST(ParseError, UnknownElementType) {
  EXPECT_EQ(bodyError("  input %x : f33[2,3]\n"),
            "t.kir:2:14: unknown element type 'f33' (expected f32, f16, bf16, f64, i32, i64 or bool)");
}

TEST(ParseError, BadShape) {
  EXPECT_EQ(bodyError("  input %x : f32[2,-3]\n"), "t.kir:2:17: shape [2,-3] has a negative dimension");
  EXPECT_EQ(bodyError("  input %x : f32[2;3]\n"), "t.kir:2:19: unexpected character ';'");
  EXPECT_EQ(bodyError("  input %x : f32[2,x]\n"), "t.kir:2:20: expected a dimension, found 'x'");
  EXPECT_EQ(bodyError("  input %x : f32\n}"), "t.kir:3:1: expected '[' and the shape after the element type, found '}'");
}

TEST(ParseError, ShapeWithTooManyElements) {
  EXPECT_EQ(bodyError("  input %x : f32[4294967296,4294967296,4294967296]\n"),
            "t.kir:2:17: shape [4294967296,4294967296,4294967296] has too many elements (the limit is 2^48)");
  EXPECT_EQ(bodyError("  input %x : f32[99999999999999999999]\n"), "t.kir:2:18: integer 99999999999999999999 is out of range");
}

TEST(ParseError, MissingClosingBrace) {
  EXPECT_EQ(errorOf("graph @g {\n  input %x : f32[2]\n"),
            "t.kir:3:1: expected 'input', 'param', 'output', 'update', 'kernel', 'plan', '%name = op(...)' or '}', found end of file");
}

TEST(ParseError, MissingResultType) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = neg(%x)\n"), "t.kir:4:1: expected ':' and the result type, found '}'");
}

TEST(ParseError, AttributeOfTheWrongKind) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = reduce_sum(%x) {axes=1} : f32[2]\n"),
            "t.kir:3:29: expected a value of kind ints for 'axes', found '1'");
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = softmax(%x) {axis=1.5} : f32[2,3]\n"),
            "t.kir:3:26: expected a value of kind int for 'axis' (an integer), found '1.5'");
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = cast(%x) {dtype=f8} : f32[2,3]\n"),
            "t.kir:3:24: unknown element type 'f8' for 'dtype'");
}

TEST(ParseError, UnknownAttribute) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = softmax(%x) {dim=1} : f32[2,3]\n"),
            "t.kir:3:21: op 'softmax' has no attribute 'dim' (it has: axis)");
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = neg(%x) {axis=1} : f32[2,3]\n"),
            "t.kir:3:17: op 'neg' has no attribute 'axis' (it has: none)");
}

TEST(ParseError, DuplicateAndMissingAttributes) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = softmax(%x) {axis=1, axis=0} : f32[2,3]\n"),
            "t.kir:3:29: attribute 'axis' given twice");
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = reduce_sum(%x) {keepdim=true} : f32[2,3]\n"),
            "t.kir:3:8: op 'reduce_sum': missing required attribute 'axes' (ints)");
}

TEST(ParseError, WordOutsideTheChoices) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = gelu(%x) {approximate=\"fast\"} : f32[2,3]\n"),
            "t.kir:3:30: 'approximate' must be one of \"none\", \"tanh\", found \"fast\"");
}

TEST(ParseError, Redefinition) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %x = neg(%x) : f32[2,3]\n"),
            "t.kir:3:3: redefinition of value %x (first defined at line 2)");
  EXPECT_EQ(bodyError(std::string(kX) + "  param %x : f32[] = zeros\n"),
            "t.kir:3:9: redefinition of value %x (first defined at line 2)");
  EXPECT_EQ(bodyError(std::string(kX) + "  output %o = %x\n  output %o = %x\n"), "t.kir:4:10: duplicate output %o");
}

TEST(ParseError, ShapeErrorFromTheOpPointsAtItsLine) {
  EXPECT_EQ(bodyError(std::string(kX) + "  input %w : f32[4,5]\n  %y = matmul(%x, %w) : f32[2,5] loc(\"m.cpp\":7:1)\n"),
            "t.kir:4:3: op 'matmul' with operands (f32[2,3], f32[4,5]): contracted dimensions differ (3 vs 4)");
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = relu(%x, %x) : f32[2,3]\n"),
            "t.kir:3:3: op 'relu' with operands (f32[2,3], f32[2,3]): expects 1 operand, got 2");
}

TEST(ParseError, ResultTypeMismatch) {
  EXPECT_EQ(bodyError(std::string(kX) + "  %y = neg(%x) : f32[3,2]\n"),
            "t.kir:3:18: op 'neg' with operands (f32[2,3]): result type f32[3,2] does not match the inferred type "
            "f32[2,3]");
}

TEST(ParseError, Strings) {
  EXPECT_EQ(bodyError("  input %x : f32[2] loc(\"a.cpp:1:1)\n"), "t.kir:2:25: unterminated string");
  EXPECT_EQ(bodyError("  input %x : f32[2] loc(\"a\\q.cpp\":1:1)\n"),
            "t.kir:2:27: invalid escape in string (expected \\\" \\\\ \\n \\t or \\xHH)");
  EXPECT_EQ(bodyError("  input %x : f32[2] loc(\"a.cpp\":0:1)\n"), "t.kir:2:33: line number out of range");
}

TEST(ParseError, Initializers) {
  EXPECT_EQ(bodyError("  param %w : f32[2] = glorot\n"),
            "t.kir:2:23: expected an initializer (zeros, ones, constant, uniform or normal), found 'glorot'");
  EXPECT_EQ(bodyError("  param %w : f32[2] = uniform(low=1, high=0, seed=1)\n"),
            "t.kir:2:23: uniform low 1 is greater than high 0");
  EXPECT_EQ(bodyError("  param %w : f32[2] = normal(mean=0, seed=1)\n"), "t.kir:2:44: 'normal' needs argument 'std'");
  EXPECT_EQ(bodyError("  param %w : f32[2] = normal(mean=0, std=1, sigma=2)\n"),
            "t.kir:2:45: 'normal' has no argument 'sigma' (it has: mean, std, seed)");
  EXPECT_EQ(bodyError("  param %w : i64[2] = normal(mean=0, std=1, seed=1)\n"),
            "t.kir:2:23: a normal initializer needs a float parameter, not i64");
  EXPECT_EQ(bodyError("  param %w : f32[2] = uniform(low=0, high=1, seed=-1)\n"),
            "t.kir:2:51: expected a seed (an integer from 0 to 2^64-1), found '-1'");
}

TEST(ParseError, Numbers) {
  EXPECT_EQ(bodyError("  param %w : f32[2] = constant(value=1e999)\n"), "t.kir:2:38: number 1e999 is out of range of f64");
  EXPECT_EQ(bodyError("  param %w : f32[2] = constant(value=-foo)\n"), "t.kir:2:38: expected a number after '-', found 'foo'");
}

TEST(ParseError, StrayBytes) {
  EXPECT_EQ(bodyError(std::string("  input %x : f32[2]\0\n", 21)), "t.kir:2:20: unexpected character '\\x00'");
  EXPECT_EQ(bodyError("  input %x : f32[2] \xff\xfe\n"), "t.kir:2:21: unexpected character '\\xff'");
  EXPECT_EQ(bodyError("  input % : f32[2]\n"), "t.kir:2:9: expected a name after '%' (letters, digits, '_' or '.')");
}

TEST(ParseError, FileStructure) {
  EXPECT_EQ(errorOf(""), "t.kir:1:1: expected 'graph', found end of file");
  EXPECT_EQ(errorOf("# only a comment\n"), "t.kir:2:1: expected 'graph', found end of file");
  EXPECT_EQ(errorOf("graph g {}"), "t.kir:1:7: expected a graph name '@name', found 'g'");
  EXPECT_EQ(errorOf("graph @g {}\ngraph @h {}\n"), "t.kir:2:1: expected end of file after the graph, found 'graph'");
  EXPECT_EQ(bodyError("  inputs %x : f32[2]\n"),
            "t.kir:2:3: expected 'input', 'param', 'output', 'update', 'kernel', 'plan', '%name = op(...)' or '}', found 'inputs'");
}

TEST(ParseError, LongTokensAreTruncatedInMessages) {
  std::string name(200, 'a');
  EXPECT_EQ(bodyError("  %y = " + name + "() : f32[]\n"), "t.kir:2:8: unknown op '" + std::string(32, 'a') + "...'");
}

}  // namespace
}  // namespace kiln::ir
