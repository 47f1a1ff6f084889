// Reading a config: toml++ parses the text (a syntax error carries file:line:col), then every
// value is typed by the field it lands in (config_schema.h), unknown keys get the closest known one
// suggested, --set overrides apply in order, and validate_config checks the result. Each error
// is one headlab::Error line naming the key and where it was set (file:line, or the --set
// argument). read_toml_entries gives other TOML files (sweep files) to their readers as plain
// entries. toml++ stays in this file: the public header only sees plain structs.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include <toml++/toml.h>

#include "config_schema.h"
#include "headlab/common/error.h"
#include "headlab/common/files.h"

namespace headlab {

namespace {

using namespace config_internal;

toml::table parse_toml(const std::string& toml_text, const std::string& origin) {
  try {
    return toml::parse(std::string_view(toml_text), std::string_view(origin));
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw Error("TOML syntax error in " + origin + ":" + std::to_string(begin.line) + ":" +
                std::to_string(begin.column) + ": " + std::string(e.description()));
  }
}

// A TOML value as TOML text, which is what `--set key=value` reads back.
std::string as_toml_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  return out.str();
}

struct Leaf {
  TomlEntry entry;
  toml::source_position at;
};

TomlEntry entry_of(const std::string& key, const toml::node& node);

void flatten(const toml::table& table, const std::string& prefix, std::vector<Leaf>& out) {
  for (auto&& [name, node] : table) {
    const std::string key = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table())
      flatten(*sub, key, out);
    else
      out.push_back({entry_of(key, node), node.source().begin});
  }
}

TomlEntry entry_of(const std::string& key, const toml::node& node) {
  TomlEntry entry;
  entry.key = key;
  entry.line = static_cast<int64_t>(node.source().begin.line);
  if (const toml::table* table = node.as_table()) {
    entry.kind = TomlEntry::Kind::table;
    std::vector<Leaf> leaves;
    flatten(*table, "", leaves);
    std::stable_sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) {
      return std::make_pair(a.at.line, a.at.column) < std::make_pair(b.at.line, b.at.column);
    });
    for (Leaf& leaf : leaves) entry.entries.push_back(std::move(leaf.entry));
    return entry;
  }
  entry.text = as_toml_text(node);
  if (node.is_string()) {
    entry.kind = TomlEntry::Kind::string;
    entry.string_value = node.as_string()->get();
  } else if (const toml::array* array = node.as_array()) {
    entry.kind = TomlEntry::Kind::array;
    for (const toml::node& item : *array) entry.items.push_back(as_toml_text(item));
  }
  return entry;
}

// "string \"abc\"", "integer 8", "float 0.5", "array [1, 2]": what the user wrote, for errors.
std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + quote(node.as_string()->get());
    case toml::node_type::integer:
      return "integer " + std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point:
      return "float " + format_float(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return std::string("boolean ") + (node.as_boolean()->get() ? "true" : "false");
    case toml::node_type::array: {
      const toml::array& array = *node.as_array();
      std::string s = "array [";
      for (size_t i = 0; i < array.size(); ++i) {
        const std::string element = describe(array[i]);
        s += (i ? ", " : "") + element.substr(element.find(' ') + 1);
      }
      return s + "]";
    }
    case toml::node_type::table:
      return "table";
    default:
      return "date/time";
  }
}

[[noreturn]] void throw_type(const std::string& key, const char* expected, const toml::node& got,
                             const std::string& where) {
  throw Error(key + " must be " + expected + ", got " + describe(got) + " (" + where + ")");
}

void assign(const KeySpec& spec, Config& config, const toml::node& node, const std::string& where) {
  std::visit(Overloaded{[&](int64_t* v) {
                          if (!node.is_integer()) throw_type(spec.key, "an integer", node, where);
                          *v = node.as_integer()->get();
                        },
                        [&](double* v) {  // an integer is a fine float: lr = 1
                          if (node.is_integer())
                            *v = static_cast<double>(node.as_integer()->get());
                          else if (node.is_floating_point())
                            *v = node.as_floating_point()->get();
                          else
                            throw_type(spec.key, "a number", node, where);
                        },
                        [&](bool* v) {
                          if (!node.is_boolean()) throw_type(spec.key, "a boolean (true or false)", node, where);
                          *v = node.as_boolean()->get();
                        },
                        [&](std::string* v) {
                          if (!node.is_string()) throw_type(spec.key, "a string", node, where);
                          *v = node.as_string()->get();
                        },
                        [&](IntList* v) {
                          if (!node.is_array()) throw_type(spec.key, "an array of integers", node, where);
                          IntList values;
                          const toml::array& array = *node.as_array();
                          for (size_t i = 0; i < array.size(); ++i) {
                            const std::string element_key = spec.key + "[" + std::to_string(i) + "]";
                            if (!array[i].is_integer()) throw_type(element_key, "an integer", array[i], where);
                            values.push_back(array[i].as_integer()->get());
                          }
                          *v = std::move(values);
                        }},
             spec.field(config));
}

std::string location(const std::string& origin, const toml::node& node) {
  const auto line = node.source().begin.line;
  return line > 0 ? origin + ":" + std::to_string(line) : origin;
}

// Walks nested tables (`[model]`, `model.n_heads = 4`, `[model.x]`) down to known keys.
void apply_table(const toml::table& table, const std::string& prefix, const std::string& origin, Config& config,
                 Origins& origins) {
  for (auto&& [name, node] : table) {
    const std::string key = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    const std::string where = location(origin, node);
    if (const KeySpec* spec = find_spec(key)) {
      assign(*spec, config, node, where);
      origins[key] = where;
    } else if (const toml::table* sub = node.as_table(); sub && (!sub->empty() || is_section(key))) {
      apply_table(*sub, key, origin, config, origins);
    } else if (is_section(key)) {
      throw Error("'" + key + "' must be a table ([" + key + "]), got " + describe(node) + " (" + where + ")");
    } else {
      throw_unknown_key(key, where);
    }
  }
}

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t"), end = s.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

// "key=value": the value is read as TOML (8, 0.5, true, [1, 2], "text"); a string key also takes
// the bare text (model.positions=sinusoidal, data.path=a b.txt); text that is no TOML value stays
// a string, so the type error shows what was written.
void apply_override(const std::string& text, Config& config, Origins& origins, const std::string& origin) {
  const std::string key = override_key(text), value = trim(text.substr(text.find('=') + 1));
  const std::string where = origin.empty() ? "--set " + text : origin;
  const KeySpec* spec = find_spec(key);
  if (!spec) throw_unknown_key(key, where);
  const bool bare_string = std::holds_alternative<std::string*>(spec->field(config)) && !value.empty() &&
                           value[0] != '"' && value[0] != '\'';
  std::optional<toml::table> parsed;
  if (!bare_string) {
    try {
      parsed = toml::parse(std::string_view("value = " + value + "\n"));
    } catch (const toml::parse_error&) {
    }
  }
  if (parsed && parsed->size() == 1 && parsed->get("value"))
    assign(*spec, config, *parsed->get("value"), where);
  else
    assign(*spec, config, toml::value<std::string>(value), where);
  origins[key] = where;
}

}  // namespace

std::string override_key(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string key = trim(text.substr(0, eq));
  HEADLAB_CHECK(eq != std::string::npos && !key.empty(),
                "malformed --set '" << text << "': expected key=value, e.g. --set model.n_heads=8");
  return key;
}

Config parse_config_text(const std::string& toml_text, const std::string& origin,
                         const std::vector<std::string>& overrides, const std::vector<std::string>& override_origins) {
  HEADLAB_CHECK(
      override_origins.empty() || override_origins.size() == overrides.size(),
      "parse_config_text: " << override_origins.size() << " origins for " << overrides.size() << " overrides");
  const toml::table document = parse_toml(toml_text, origin);
  Config config;
  Origins origins;
  apply_table(document, "", origin, config, origins);
  for (size_t i = 0; i < overrides.size(); ++i)
    apply_override(overrides[i], config, origins, override_origins.empty() ? "" : override_origins[i]);
  validate_config(config, origins);
  return config;
}

std::vector<TomlEntry> read_toml_entries(const std::string& toml_text, const std::string& origin) {
  std::vector<TomlEntry> entries;
  for (auto&& [name, node] : parse_toml(toml_text, origin)) entries.push_back(entry_of(std::string(name.str()), node));
  return entries;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const std::vector<std::string>& override_origins) {
  return parse_config_text(read_text_file(path, "config file"), path, overrides, override_origins);
}

}  // namespace headlab
