// A strict JSON reader (RFC 8259) for the tests that check what headlab prints as JSON (eval
// --json, info --json): anything a standard parser would refuse, trailing text and a repeated key
// included, throws std::runtime_error naming the offset.
//   const test::JsonValue v = test::parse_json(output);
//   v["loss"].number();  v["model"]["layer_heads"][1].number();  v["accuracy"].is_null();
#pragma once

#include <string>
#include <vector>

namespace headlab::test {

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool flag = false;
  double value = 0;  // a number, as strtod reads its text
  std::string text;  // a string's value, or a number's text as written
  // An array's items, or an object's values with their keys beside them, in the order written
  // (not a vector of pairs: a pair of this still incomplete type does not compile with clang).
  std::vector<JsonValue> items;
  std::vector<std::string> keys_;

  bool is_null() const { return kind == Kind::null; }
  bool has(const std::string& key) const;
  double number() const;                                      // throws unless a number
  const std::string& string() const;                          // throws unless a string
  bool boolean() const;                                       // throws unless true or false
  const JsonValue& operator[](const std::string& key) const;  // throws unless an object with the key
  const JsonValue& operator[](size_t index) const;            // throws unless an array that long
  size_t size() const;                                        // of an array or object
  std::vector<std::string> keys() const;                      // of an object, in order
};

JsonValue parse_json(const std::string& text);

}  // namespace headlab::test
