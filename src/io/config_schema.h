// Private to src/io/config*.cpp. The schema: one KeySpec per key of config.h's tables (name,
// allowed values, doc, accessor), plus what both halves need from it. config_schema.cpp builds
// it and derives formatting, validation and the public schema views; config.cpp reads TOML into
// a Config through it. Nothing here sees toml++.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "headlab/io/config.h"

namespace headlab::config_internal {

// The `allowed` column of the key tables.
struct Rule {
  enum class Kind { any, above, at_least, closed, half_open, open, one_of } kind = Kind::any;
  double lo = 0, hi = 0;
  const char* choices = "";  // "a|b|c" for one_of
};

// The field a key reads and writes; its alternative is the key's type.
using Field = std::variant<int64_t*, double*, bool*, std::string*, IntList*>;

struct KeySpec {
  std::string key;  // "model.n_heads"
  Rule rule;
  const char* doc;
  Field (*field)(Config&);
};

const std::vector<KeySpec>& schema();
const KeySpec* find_spec(const std::string& key);  // nullptr if unknown
bool is_section(const std::string& name);          // "model", "data", "train"
// Read-only access for the const paths: the accessor only takes an address.
inline Field field_of(const KeySpec& spec, const Config& config) {
  return spec.field(const_cast<Config&>(config));
}

std::string format_float(double v);       // shortest round-trip TOML float: 0.1, 3e-4, 1.0
std::string quote(const std::string& s);  // TOML basic string, escaped

// "unknown key 'model.n_head' in <where>; did you mean 'model.n_heads'?" (where may be empty).
[[noreturn]] void throw_unknown_key(const std::string& key, const std::string& where);

// Where each key got its value ("configs/x.toml:7", "--set model.dropout=0.5"); a validation
// error names the first key involved that has an entry.
using Origins = std::map<std::string, std::string>;
void validate_config(const Config& config, const Origins& origins);

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;  // clang 14 (the fuzz build) does not deduce aggregates by itself

}  // namespace headlab::config_internal
