// A recursive-descent JSON reader; see json_reader.h.
#include "support/json_reader.h"

#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace headlab::test {

namespace {

class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  JsonValue document() {
    JsonValue v = value();
    space();
    if (i_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    const std::string_view want(w);
    if (s_.compare(i_, want.size(), want) != 0) return false;
    i_ += want.size();
    return true;
  }

  JsonValue value() {
    space();
    if (i_ >= s_.size()) fail("expected a value");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = JsonValue::Kind::object;
      ++i_;
      if (eat('}')) return v;
      do {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key");
        std::string key = string();
        for (const std::string& k : v.keys_)
          if (k == key) fail("repeated key '" + key + "'");
        expect(':');
        v.keys_.push_back(std::move(key));
        v.items.push_back(value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = JsonValue::Kind::array;
      ++i_;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = string();
    } else if (word("true")) {
      v.kind = JsonValue::Kind::boolean;
      v.flag = true;
    } else if (word("false")) {
      v.kind = JsonValue::Kind::boolean;
    } else if (word("null")) {
      v.kind = JsonValue::Kind::null;
    } else {
      v.kind = JsonValue::Kind::number;
      v.text = number();
      v.value = std::strtod(v.text.c_str(), nullptr);
    }
    return v;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == from) fail("expected a digit");
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    const bool zero = i_ < s_.size() && s_[i_] == '0';
    if (digits() > 1 && zero) fail("a leading zero");
    if (i_ < s_.size() && s_[i_] == '.') ++i_, digits();
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    return s_.substr(start, i_ - start);
  }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("a short \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      u = u * 16 + (h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : (fail("a bad \\u escape"), 0));
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("an unclosed string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("an unclosed string");
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!word("\\u")) fail("a lone high surrogate");
            const unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("a bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("a lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("a bad escape \\") + e);
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

[[noreturn]] void wrong_kind(const char* wanted) {
  throw std::runtime_error(std::string("JSON: not ") + wanted);
}

}  // namespace

JsonValue parse_json(const std::string& text) {
  return Reader(text).document();
}

bool JsonValue::has(const std::string& key) const {
  if (kind != Kind::object) wrong_kind("an object");
  for (const std::string& k : keys_)
    if (k == key) return true;
  return false;
}

double JsonValue::number() const {
  if (kind != Kind::number) wrong_kind("a number");
  return value;
}

const std::string& JsonValue::string() const {
  if (kind != Kind::string) wrong_kind("a string");
  return text;
}

bool JsonValue::boolean() const {
  if (kind != Kind::boolean) wrong_kind("true or false");
  return flag;
}

const JsonValue& JsonValue::operator[](const std::string& key) const {
  if (kind != Kind::object) wrong_kind("an object");
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return items[i];
  throw std::runtime_error("JSON: no key '" + key + "'");
}

const JsonValue& JsonValue::operator[](size_t index) const {
  if (kind != Kind::array) wrong_kind("an array");
  if (index >= items.size()) throw std::runtime_error("JSON: no item " + std::to_string(index));
  return items[index];
}

size_t JsonValue::size() const {
  if (kind == Kind::array) return items.size();
  if (kind == Kind::object) return keys_.size();
  wrong_kind("an array or object");
}

std::vector<std::string> JsonValue::keys() const {
  if (kind != Kind::object) wrong_kind("an object");
  return keys_;
}

}  // namespace headlab::test
