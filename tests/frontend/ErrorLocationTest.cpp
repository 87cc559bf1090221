// Shape mistakes name the user's own file and line (captured with std::source_location), the op
// and the operand types — never a line inside kiln.
#include "FrontendTestUtil.h"

namespace kiln {
namespace {

using testing::contains;
using testing::errorOf;

/// "…/ErrorLocationTest.cpp:LINE:" — the location prefix of an error raised on `line` of this file.
std::string here(int line) { return fmt::format("{}:{}:", __FILE__, line); }

TEST(ErrorLocation, MatmulNamesTheCallingLine) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2, 3});
  Tensor b = t.input("b", DType::f32, {4, 5});
  const int line = __LINE__; std::string msg = errorOf([&] { matmul(a, b); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;  // the message starts with this file:line
  EXPECT_TRUE(contains(msg, "op 'matmul'")) << msg;
  EXPECT_TRUE(contains(msg, "f32[2,3]")) << msg;
  EXPECT_TRUE(contains(msg, "f32[4,5]")) << msg;
}

TEST(ErrorLocation, OperatorPlusNamesTheCallingLine) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2, 3});
  Tensor b = t.input("b", DType::f32, {4});
  const int line = __LINE__; std::string msg = errorOf([&] { (void)(a + b); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "op 'add' with operands (f32[2,3], f32[4])")) << msg;
}

TEST(ErrorLocation, OperatorsWithScalarsAndChainsNameTheirLine) {
  Tracer t;
  Tensor a = t.input("a", DType::f32, {2, 3});
  Tensor b = t.input("b", DType::f32, {5});
  Tensor ok = a * 2.0;
  const int line = __LINE__; std::string msg = errorOf([&] { (void)(1.0 - ok * b); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "op 'mul' with operands (f32[2,3], f32[5])")) << msg;
  const int line2 = __LINE__; msg = errorOf([&] { (void)(a < b); });
  EXPECT_EQ(msg.rfind(here(line2), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "op 'lt'")) << msg;
}

TEST(ErrorLocation, ModuleForwardNamesTheCallingLine) {
  nn::Linear fc(10, 5);
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 7});
  const int line = __LINE__; std::string msg = errorOf([&] { fc(x); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "op 'linear' with operands (f32[2,7], f32[5,10], f32[5])")) << msg;
  const int line2 = __LINE__; msg = errorOf([&] { fc.forward(x); });
  EXPECT_EQ(msg.rfind(here(line2), 0), 0u) << msg;
}

TEST(ErrorLocation, SequentialReportsTheUsersForwardCall) {
  nn::Sequential s{std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(9, 2)};
  Tracer t;
  Tensor x = t.input("x", DType::f32, {3, 4});
  const int line = __LINE__; std::string msg = errorOf([&] { s(x); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "f32[3,8], f32[2,9]")) << msg;
}

TEST(ErrorLocation, FrontEndChecksNameTheCallingLine) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2, 3});
  const int line = __LINE__; std::string msg = errorOf([&] { sum(x, 2); });
  EXPECT_EQ(msg.rfind(here(line), 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "op 'reduce_sum' with operands (f32[2,3]): axis 2 is out of range for rank 2")) << msg;
  const int line2 = __LINE__; msg = errorOf([&] { transpose(x, 0, -3); });
  EXPECT_EQ(msg.rfind(here(line2), 0), 0u) << msg;
  const int line3 = __LINE__; msg = errorOf([&] { t.input("x", DType::f32, {1}); });
  EXPECT_EQ(msg.rfind(here(line3), 0), 0u) << msg;
  const int line4 = __LINE__; msg = errorOf([&] { reshape(x, {4, -1}); });
  EXPECT_EQ(msg.rfind(here(line4), 0), 0u) << msg;
}

TEST(ErrorLocation, NodesRecordTheUsersLine) {
  Tracer t;
  Tensor x = t.input("x", DType::f32, {2});
  const int line = __LINE__; Tensor y = exp(x) + x;
  const SourceLoc& loc = y.value()->producer->loc;
  EXPECT_EQ(loc.file, __FILE__);
  EXPECT_EQ(loc.line, line);
  EXPECT_EQ(x.value()->loc.line, line - 1);  // inputs record where they were declared
}

}  // namespace
}  // namespace kiln
