// JSON text, the one writer behind every JSON headlab prints or embeds: `eval --json` and
// `info --json`, bench's line and the data of `headlab report`'s page. Values are built as JSON
// text; JsonObject keeps its keys in the order they are added and prints one line.
//   JsonObject o;
//   o.text("split", "val").integer("n_targets", n).number("loss", loss).raw("accuracy", "null");
//   std::printf("%s\n", o.str().c_str());  // {"split": "val", "n_targets": 1880, "loss": 2.1689..., ...}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headlab {

// `text` quoted and escaped: " \ and control characters, and < > & as \u003c \u003e \u0026 so
// that the text is also safe inside an HTML <script>. Other bytes pass through (UTF-8 stays UTF-8).
std::string json_string(const std::string& text);

// The shortest decimal that reads back as exactly `v` (std::to_chars: "0.1", "2.1689453125",
// "1e-05"); null when `v` is not finite, which JSON cannot hold.
std::string json_number(double v);

// printf("%.*f", decimals, v), null when not finite: a measurement shown to a chosen resolution
// (bench's milliseconds), not a result to read back exactly.
std::string json_fixed(double v, int decimals);

// "[a, b]" of items that are JSON text already.
std::string json_list(const std::vector<std::string>& items);

class JsonObject {
 public:
  JsonObject& raw(const std::string& key, const std::string& json);  // a value that is JSON text already
  JsonObject& text(const std::string& key, const std::string& value) { return raw(key, json_string(value)); }
  JsonObject& number(const std::string& key, double value) { return raw(key, json_number(value)); }
  JsonObject& integer(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }
  JsonObject& boolean(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  std::string str() const { return "{" + body_ + "}"; }  // {"key": value, ...} on one line

 private:
  std::string body_;
};

}  // namespace headlab
