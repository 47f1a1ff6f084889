// JSON text: string escaping and number formatting. See include/headlab/io/json.h.
#include "headlab/io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "headlab/common/error.h"

namespace headlab {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == '<' || c == '>' || c == '&') {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];  // the longest shortest form, "-2.2250738585072014e-308", is 24 characters
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  HEADLAB_CHECK(r.ec == std::errc(), "json_number: cannot format " << v);
  return std::string(buf, r.ptr);
}

std::string json_fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  char buf[512];  // %.*f of 1e308 is 309 digits before the point
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

JsonObject& JsonObject::raw(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_string(key) + ": " + json;
  return *this;
}

}  // namespace headlab
