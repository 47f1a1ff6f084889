// io/json.h, the one JSON writer, read back by the tests' strict reader (tests/support/json_reader.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "headlab/io/json.h"
#include "support/json_reader.h"

using namespace headlab;

TEST_CASE("json_string escapes quotes, backslashes, control characters and <, > and &", "[io][json]") {
  CHECK(json_string("plain text") == "\"plain text\"");
  CHECK(json_string("a\"b\\c\nd</script>") == "\"a\\\"b\\\\c\\nd\\u003c/script\\u003e\"");
  CHECK(json_string(std::string("\x01\t\r", 3)) == "\"\\u0001\\t\\r\"");
  CHECK(json_string("R&D") == "\"R\\u0026D\"");
  CHECK(json_string("na\xc3\xafve") == "\"na\xc3\xafve\"");  // UTF-8 passes through
  const std::string every = std::string("\0\x1f \"\\/<>&\x7f", 10) + "\xe2\x82\xac";
  CHECK(test::parse_json(json_string(every)).string() == every);
}

TEST_CASE("json_number reads back as exactly the double it was given, and null for inf and nan", "[io][json]") {
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      1.0,
                                      0.1,
                                      1.0 / 3.0,
                                      2.168945312500001,
                                      -123456789.0123456789,
                                      1e-300,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::min(),
                                      static_cast<double>(static_cast<float>(2.1689)),
                                      9007199254740993.0};
  for (const double v : values) {
    const std::string text = json_number(v);
    INFO(text);
    const double back = test::parse_json(text).number();
    CHECK(std::memcmp(&back, &v, sizeof v) == 0);  // bit for bit, the sign of zero included
  }
  CHECK(json_number(0.1) == "0.1");  // shortest, not %.17g's 0.10000000000000001
  CHECK(json_number(2.0) == "2");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_number(-std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_number(std::nan("")) == "null");
  CHECK(json_fixed(1.23456, 3) == "1.235");
  CHECK(json_fixed(2, 0) == "2");
  CHECK(json_fixed(std::nan(""), 2) == "null");
}

TEST_CASE("JsonObject keeps its keys in order and reads back as a JSON object", "[io][json]") {
  JsonObject inner;
  inner.integer("n", -3).boolean("yes", true).boolean("no", false);
  JsonObject o;
  o.text("split", "val").number("loss", 1.0 / 3.0).raw("accuracy", "null").raw("inner", inner.str());
  o.raw("pairs", json_list({json_list({"0", "1"}), json_list({})}));
  const std::string text = o.str();
  CHECK(text.find('\n') == std::string::npos);
  const test::JsonValue v = test::parse_json(text);
  CHECK(v.keys() == std::vector<std::string>{"split", "loss", "accuracy", "inner", "pairs"});
  CHECK(v["split"].string() == "val");
  CHECK(v["loss"].number() == 1.0 / 3.0);
  CHECK(v["accuracy"].is_null());
  CHECK(v["inner"]["n"].number() == -3);
  CHECK(v["inner"]["yes"].boolean());
  CHECK_FALSE(v["inner"]["no"].boolean());
  CHECK(v["pairs"].size() == 2);
  CHECK(v["pairs"][0][1].number() == 1);
  CHECK(v["pairs"][1].size() == 0);
  CHECK(JsonObject().str() == "{}");
}

TEST_CASE("the tests' JSON reader refuses what a standard parser refuses", "[io][json]") {
  for (const std::string bad : {"",         "{",   "{\"a\": 1,}", "[1 2]",     "{\"a\": 1} x", "{\"a\": 1, \"a\": 2}",
                                "01",       "1.",  ".5",          "-",         "+1",           "nan",
                                "Infinity", "'a'", "\"a\nb\"",    "\"\\x41\"", "\"\\ud800\"",  "{a: 1}",
                                "tru",      "[1,]"}) {
    INFO(bad);
    CHECK_THROWS(test::parse_json(bad));
  }
  CHECK(test::parse_json(" [1e-5, -0, 0.5E+2, true, null, \"\\u00e9\\ud83d\\ude00\\/\"] ")[5].string() ==
        "\xc3\xa9\xf0\x9f\x98\x80/");
  CHECK(test::parse_json("1e-5").number() == 1e-5);
}
