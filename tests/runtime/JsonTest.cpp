#include "runtime/Json.h"

#include <gtest/gtest.h>

namespace kiln::rt::json {
namespace {

TEST(Json, ParsesNestedDocument) {
  Value v = parse(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}, "e": []} )", "test");
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].first, "a");  // source order is kept
  const Value* a = v.find("a");
  ASSERT_TRUE(a && a->isArray());
  ASSERT_EQ(a->items.size(), 5u);
  EXPECT_EQ(a->items[0].asInt64(), 1);
  EXPECT_EQ(a->items[1].text, "-2.5e3");
  EXPECT_EQ(a->items[1].asInt64(), std::nullopt);  // not an integer literal
  EXPECT_EQ(a->items[2].kind, Value::Kind::boolean);
  EXPECT_TRUE(a->items[2].flag);
  EXPECT_FALSE(a->items[3].flag);
  EXPECT_EQ(a->items[4].kind, Value::Kind::null);
  EXPECT_EQ(v.find("b")->find("c")->text, "d");
  EXPECT_TRUE(v.find("e")->items.empty());
  EXPECT_EQ(v.find("zzz"), nullptr);
}

TEST(Json, IntegersAreExact) {
  // 2^53 + 1 is not representable as a double; offsets in large files must not be rounded.
  EXPECT_EQ(parse("9007199254740993", "t").asInt64(), int64_t{9007199254740993});
  EXPECT_EQ(parse("18446744073709551615", "t").asUInt64(), uint64_t{18446744073709551615u});
  EXPECT_EQ(parse("18446744073709551615", "t").asInt64(), std::nullopt);  // does not fit
  EXPECT_EQ(parse("-1", "t").asUInt64(), std::nullopt);
  EXPECT_EQ(parse("-1", "t").asInt64(), -1);
  EXPECT_EQ(parse("1.0", "t").asInt64(), std::nullopt);
}

TEST(Json, DecodesEscapes) {
  Value v = parse(R"("a\"b\\c\/d\n\t\u0041\u00e9\u20ac\ud83d\ude00")", "t");
  EXPECT_EQ(v.text, "a\"b\\c/d\n\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(parse("\"\xC3\xA9\"", "t").text, "\xC3\xA9");  // raw UTF-8 passes through
}

TEST(Json, QuoteRoundTrips) {
  std::string s = "tab\there \"quoted\" back\\slash \x01 \xC3\xA9";
  EXPECT_EQ(quote("a\"b"), R"("a\"b")");
  EXPECT_EQ(quote("\x01"), R"("\u0001")");
  EXPECT_EQ(parse(quote(s), "t").text, s);
}

}  // namespace
}  // namespace kiln::rt::json
