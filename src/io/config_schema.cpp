// The schema behind config.h: the key tables expanded into one KeySpec per key, and everything
// derived from it that needs no TOML parser: values formatted as TOML, the closest-key suggestion
// for unknown keys, validation (each key's allowed set, then the cross-key checks, the model's
// through nn's spec_problem on model_spec) and the public views (to_toml, config_value,
// config_keys, config_schema, model_spec). config.cpp does the reading.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>

#include "config_schema.h"
#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/text.h"

namespace headlab::config_internal {

// ---------------------------------------------------------------------------------------------
// The schema, generated from the HEADLAB_*_KEYS tables.

namespace {

// The `allowed` column of the key tables (config.h).
Rule any() {
  return {};
}
Rule positive() {
  return {Rule::Kind::above, 0, 0};
}
Rule non_negative() {
  return {Rule::Kind::at_least, 0, 0};
}
Rule at_least(double lo) {
  return {Rule::Kind::at_least, lo, 0};
}
Rule closed(double lo, double hi) {
  return {Rule::Kind::closed, lo, hi};
}
Rule half_open(double lo, double hi) {
  return {Rule::Kind::half_open, lo, hi};
}
Rule open_interval(double lo, double hi) {
  return {Rule::Kind::open, lo, hi};
}
Rule one_of(const char* choices) {
  return {Rule::Kind::one_of, 0, 0, choices};
}

}  // namespace

#define HEADLAB_SCHEMA_ROW(section, name, type, default_value, allowed, doc) \
  KeySpec{#section "." #name, allowed, doc, [](Config& c) -> Field { return &c.section.name; }},
#define HEADLAB_MODEL_ROW(...) HEADLAB_SCHEMA_ROW(model, __VA_ARGS__)
#define HEADLAB_DATA_ROW(...) HEADLAB_SCHEMA_ROW(data, __VA_ARGS__)
#define HEADLAB_TRAIN_ROW(...) HEADLAB_SCHEMA_ROW(train, __VA_ARGS__)

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> table = {HEADLAB_MODEL_KEYS(HEADLAB_MODEL_ROW) HEADLAB_DATA_KEYS(HEADLAB_DATA_ROW)
                                                 HEADLAB_TRAIN_KEYS(HEADLAB_TRAIN_ROW)};
  return table;
}

#undef HEADLAB_TRAIN_ROW
#undef HEADLAB_DATA_ROW
#undef HEADLAB_MODEL_ROW
#undef HEADLAB_SCHEMA_ROW

const KeySpec* find_spec(const std::string& key) {
  for (const KeySpec& spec : schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

bool is_section(const std::string& name) {
  for (const KeySpec& spec : schema())
    if (spec.key.compare(0, name.size() + 1, name + ".") == 0) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Formatting values as TOML (to_toml, config_value, docs, error messages).

// Shortest text that reads back to the same double, as a TOML float: "0.1", "3e-4", "1.0".
std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::string s(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  if (size_t e = s.find('e'); e != std::string::npos) {  // "3e-04" -> "3e-4", "1e+20" -> "1e20"
    std::string exponent = s.substr(e + 1);
    const bool negative = exponent[0] == '-';
    exponent.erase(0, exponent.find_first_not_of("+-"));
    exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
    return s.substr(0, e) + "e" + (negative ? "-" : "") + exponent;
  }
  return s.find('.') == std::string::npos ? s + ".0" : s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {

// A rule's bound: "0", "2", "0.5" (integers print without ".0").
std::string format_bound(double v) {
  std::string s = format_float(v);
  return s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0 ? s.substr(0, s.size() - 2) : s;
}

// TOML text of a field; `bare_strings` gives the --set form (strings unquoted).
std::string format_field(const Field& field, bool bare_strings) {
  return std::visit(
      Overloaded{[](const int64_t* v) { return std::to_string(*v); }, [](const double* v) { return format_float(*v); },
                 [](const bool* v) { return std::string(*v ? "true" : "false"); },
                 [&](const std::string* v) { return bare_strings ? *v : quote(*v); },
                 [](const IntList* v) {
                   std::string s = "[";
                   for (size_t i = 0; i < v->size(); ++i) s += (i ? ", " : "") + std::to_string((*v)[i]);
                   return s + "]";
                 }},
      field);
}

const char* type_name(const Field& field) {
  return std::visit(
      Overloaded{[](int64_t*) { return "integer"; }, [](double*) { return "float"; }, [](bool*) { return "boolean"; },
                 [](std::string*) { return "string"; }, [](IntList*) { return "array of integers"; }},
      field);
}

// "> 0", "[0, 1)", "decoder, encoder"; "" for any(). (Built by appending: GCC 12 warns falsely
// on "literal" + std::string here.)
std::string describe_rule(const Rule& rule) {
  std::string s;
  auto interval = [&](char open, char close) {
    s.append(1, open).append(format_bound(rule.lo)).append(", ").append(format_bound(rule.hi)).append(1, close);
  };
  switch (rule.kind) {
    case Rule::Kind::any:
      break;
    case Rule::Kind::above:
      s.append("> ").append(format_bound(rule.lo));
      break;
    case Rule::Kind::at_least:
      s.append(">= ").append(format_bound(rule.lo));
      break;
    case Rule::Kind::closed:
      interval('[', ']');
      break;
    case Rule::Kind::half_open:
      interval('[', ')');
      break;
    case Rule::Kind::open:
      interval('(', ')');
      break;
    case Rule::Kind::one_of:
      for (const char* c = rule.choices; *c; ++c) *c == '|' ? s.append(", ") : s.append(1, *c);
      break;
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Unknown keys: suggest the closest known one.

namespace {

std::string leaf(const std::string& key) {
  return key.substr(key.rfind('.') + 1);
}

// The nearest key by full name, or by the name after the section plus 2 (a key under the wrong
// section, or with no section); ties go to the key sharing more characters ("train.warmup" is 6
// edits from both "train.lr" and "train.warmup_steps"). None when even the nearest needs more
// edits than half the longer of the two names ("train.learning_rate" gets no suggestion).
std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX, best_shared = 0;
  for (const KeySpec& spec : schema()) {
    const size_t full = edit_distance(key, spec.key);
    const size_t d = std::min(full, edit_distance(leaf(key), leaf(spec.key)) + 2);
    const size_t shared = (key.size() + spec.key.size() - full) / 2;  // longest common subsequence
    if (d < best_distance || (d == best_distance && shared > best_shared))
      best_distance = d, best_shared = shared, best = spec.key;
  }
  return best_distance <= std::max({size_t(2), leaf(key).size() / 2, leaf(best).size() / 2}) ? best : "";
}

}  // namespace

[[noreturn]] void throw_unknown_key(const std::string& key, const std::string& where) {
  std::string message = "unknown key '" + key + "'" + (where.empty() ? "" : " in " + where);
  const std::string suggestion = closest_key(key);
  throw Error(message + (suggestion.empty() ? "; docs/config.md and `headlab info --keys` list every key"
                                            : "; did you mean '" + suggestion + "'?"));
}

// ---------------------------------------------------------------------------------------------
// Validation: each key against its rule, then the combinations no single key can check.

namespace {

// The message, with where the first of `keys` that has an origin got its value.
[[noreturn]] void fail(const std::string& message, const std::vector<const char*>& keys, const Origins& origins) {
  for (const char* key : keys)
    if (auto it = origins.find(key); it != origins.end()) throw Error(message + " (" + it->second + ")");
  throw Error(message);
}
[[noreturn]] void fail(const std::string& message, std::initializer_list<const char*> keys, const Origins& origins) {
  fail(message, std::vector<const char*>(keys), origins);
}

void check_rule(const KeySpec& spec, const Config& config, const Origins& origins) {
  const Rule& rule = spec.rule;
  auto check_number = [&](const std::string& name, double v, const std::string& shown) {
    if (!std::isfinite(v)) fail(concat(name, " must be a finite number, got ", shown), {spec.key.c_str()}, origins);
    bool ok = true;
    switch (rule.kind) {
      case Rule::Kind::above:
        ok = v > rule.lo;
        break;
      case Rule::Kind::at_least:
        ok = v >= rule.lo;
        break;
      case Rule::Kind::closed:
        ok = v >= rule.lo && v <= rule.hi;
        break;
      case Rule::Kind::half_open:
        ok = v >= rule.lo && v < rule.hi;
        break;
      case Rule::Kind::open:
        ok = v > rule.lo && v < rule.hi;
        break;
      case Rule::Kind::any:
      case Rule::Kind::one_of:
        break;
    }
    const std::string allowed = describe_rule(rule);  // "> 0" or an interval "[0, 1)"
    const char* in = allowed[0] == '[' || allowed[0] == '(' ? "in " : "";
    if (!ok) fail(concat(name, " must be ", in, allowed, ", got ", shown), {spec.key.c_str()}, origins);
  };
  std::visit(Overloaded{[&](const int64_t* v) { check_number(spec.key, double(*v), std::to_string(*v)); },
                        [&](const double* v) { check_number(spec.key, *v, format_float(*v)); }, [](const bool*) {},
                        [&](const std::string* v) {
                          if (rule.kind != Rule::Kind::one_of) return;
                          std::vector<std::string> choices;
                          for (std::string_view rest = rule.choices;;) {
                            const size_t bar = rest.find('|');
                            if (rest.substr(0, bar) == *v) return;
                            choices.emplace_back(rest.substr(0, bar));
                            if (bar == std::string_view::npos) break;
                            rest.remove_prefix(bar + 1);
                          }
                          const std::string near = closest_name(*v, choices);
                          fail(concat(spec.key, " must be one of ", describe_rule(rule), "; got ", quote(*v),
                                      near.empty() ? "" : "; did you mean '" + near + "'?"),
                               {spec.key.c_str()}, origins);
                        },
                        [&](const IntList* v) {
                          for (size_t i = 0; i < v->size(); ++i)
                            check_number(concat(spec.key, "[", i, "]"), double((*v)[i]), std::to_string((*v)[i]));
                        }},
             field_of(spec, config));
}

// data.task=translate: its lengths fit the model and the batch budget, and data.path names pairs.
void validate_translation(const DataConfig& d, const ModelConfig& m, const Origins& origins) {
  const int64_t source_len = d.source_len > 0 ? d.source_len : d.seq_len;
  if (d.seq_len < 2 || source_len < 2)
    fail(concat("data.task=translate needs data.seq_len=", d.seq_len, " and data.source_len=", source_len,
                " of at least 2 (a token and </s>)"),
         {"data.seq_len", "data.source_len"}, origins);
  if (source_len > m.max_seq_len)
    fail(concat("data.source_len=", source_len, " exceeds model.max_seq_len=", m.max_seq_len),
         {"data.source_len", "model.max_seq_len"}, origins);
  if (d.batch_tokens < std::max(d.seq_len, source_len))
    fail(concat("data.batch_tokens=", d.batch_tokens, " cannot hold one row of the longest pair allowed (data.seq_len=",
                d.seq_len, ", data.source_len=", source_len, ")"),
         {"data.batch_tokens", "data.seq_len", "data.source_len"}, origins);
  if (d.path.empty())
    fail("data.task=translate needs data.path: bible, or the source file", {"data.path", "data.task"}, origins);
  if (d.path == kBibleAlias && !d.target_path.empty())
    fail(concat("data.target_path=", d.target_path,
                " is for a source file in data.path; data.path=bible reads the "
                "Bible's modules (data.source_module, data.target_module)"),
         {"data.target_path", "data.path"}, origins);
  if (d.path != kBibleAlias && d.target_path.empty())
    fail(concat("data.path=", d.path,
                " is a source file: data.task=translate needs data.target_path, its "
                "line-aligned target file"),
         {"data.target_path", "data.path"}, origins);
}

}  // namespace

void validate_config(const Config& config, const Origins& origins) {
  for (const KeySpec& spec : schema()) check_rule(spec, config, origins);
  const ModelConfig& m = config.model;
  const DataConfig& d = config.data;
  const TrainConfig& t = config.train;
  if (m.d_head == 0 && m.d_model % m.n_heads != 0)
    fail(concat("model.d_model=", m.d_model, " is not divisible by model.n_heads=", m.n_heads,
                "; set model.d_head to choose the head width"),
         {"model.d_model", "model.n_heads"}, origins);
  if (model_kind_named(m.kind).source) {
    const ModelSpec s = model_spec(config);
    for (const auto& [d_head, heads, d_head_key, heads_key] :
         {std::tuple{m.enc_d_head, s.enc_n_heads, "model.enc_d_head", "model.enc_n_heads"},
          std::tuple{m.cross_d_head, s.cross_n_heads, "model.cross_d_head", "model.cross_n_heads"}})
      if (d_head == 0 && heads > 0 && m.d_model % heads != 0)
        fail(concat("model.d_model=", m.d_model, " is not divisible by ", heads_key, "=", heads, "; set ", d_head_key,
                    " to choose the head width"),
             {"model.d_model", heads_key}, origins);
  }
  // The model's own rules live in nn (spec_problem), on the spec these keys build.
  if (const std::optional<SpecProblem> p = spec_problem(model_spec(config), "model.")) {
    std::vector<const char*> keys;
    for (const std::string& field : p->fields) keys.push_back(field.c_str());
    fail(p->message, keys, origins);
  }
  if (d.seq_len > m.max_seq_len)
    fail(concat("data.seq_len=", d.seq_len, " exceeds model.max_seq_len=", m.max_seq_len),
         {"data.seq_len", "model.max_seq_len"}, origins);
  if (d.vocab_size == 1 || d.vocab_size > m.vocab_size)
    fail(concat("data.vocab_size=", d.vocab_size,
                " must be 0 (= model.vocab_size) or in [2, model.vocab_size=", m.vocab_size, "]"),
         {"data.vocab_size", "model.vocab_size"}, origins);
  if (d.tokenizer == "sentencepiece" && task_named(d.task).family == TaskFamily::generated)
    fail(concat("data.tokenizer=sentencepiece is for text and translate; data.task=", d.task, " has its own tokens"),
         {"data.tokenizer", "data.task"}, origins);
  if (d.tokenizer == "sentencepiece" && d.vocab_size < 8)
    fail(concat("data.tokenizer=sentencepiece needs data.vocab_size (its vocabulary, at least 8, at most "
                "model.vocab_size=",
                m.vocab_size, "); got ", d.vocab_size),
         {"data.vocab_size", "data.tokenizer"}, origins);
  for (int64_t offset : d.offsets)
    if (d.task == "k_relation" && offset >= d.seq_len)
      fail(concat("data.offsets holds ", offset, ", which is not below data.seq_len=", d.seq_len),
           {"data.offsets", "data.seq_len"}, origins);
  if (d.task == "k_relation" && d.offsets.empty())
    fail("data.task=k_relation needs at least one entry in data.offsets", {"data.offsets", "data.task"}, origins);
  if (d.max_len > d.seq_len)
    fail(concat("data.max_len=", d.max_len, " exceeds data.seq_len=", d.seq_len), {"data.max_len", "data.seq_len"},
         origins);
  if (d.min_len > (d.max_len > 0 ? d.max_len : d.seq_len))
    fail(concat("data.min_len=", d.min_len, " exceeds ",
                d.max_len > 0 ? "data.max_len=" : "data.seq_len=", d.max_len > 0 ? d.max_len : d.seq_len),
         {"data.min_len", "data.max_len", "data.seq_len"}, origins);
  if (d.train_fraction + d.val_fraction >= 1)
    fail(concat("data.train_fraction=", format_float(d.train_fraction),
                " + data.val_fraction=", format_float(d.val_fraction), " must be below 1: the rest is the test split"),
         {"data.train_fraction", "data.val_fraction"}, origins);
  if (d.task == "text" && d.path.empty())
    fail("data.task=text needs data.path (a text file)", {"data.path", "data.task"}, origins);
  const TaskInfo& task = task_named(d.task);
  if (model_kind_named(m.kind).kind != task.scored_by)
    fail(concat("data.task=", d.task, " needs model.kind=", model_kind_info(task.scored_by).name, ": ", task.why),
         {"model.kind", "data.task"}, origins);
  if (task.family == TaskFamily::parallel) validate_translation(d, m, origins);
  if (t.warmup_steps > t.steps)
    fail(concat("train.warmup_steps=", t.warmup_steps, " exceeds train.steps=", t.steps),
         {"train.warmup_steps", "train.steps"}, origins);
}

}  // namespace headlab::config_internal

// ---------------------------------------------------------------------------------------------
// Public views of the schema.

namespace headlab {

using namespace config_internal;

void validate(const Config& config) {
  validate_config(config, {});
}

ModelSpec model_spec(const Config& config) {
  const ModelConfig& m = config.model;
  ModelSpec s;
  s.kind = model_kind_named(m.kind).kind;
  s.vocab_size = m.vocab_size;
  s.d_model = m.d_model;
  s.n_heads = m.n_heads;
  s.n_kv_heads = m.n_kv_heads == 0 ? m.n_heads : m.n_kv_heads;
  s.d_head = m.d_head == 0 ? m.d_model / m.n_heads : m.d_head;
  s.n_layers = m.n_layers;
  if (model_kind_info(s.kind).source) {
    // The encoder and the cross-attention default to the decoder's shape.
    s.n_encoder_layers = m.n_encoder_layers == 0 ? m.n_layers : m.n_encoder_layers;
    s.enc_n_heads = m.enc_n_heads == 0 ? m.n_heads : m.enc_n_heads;
    s.enc_n_kv_heads = m.enc_n_kv_heads == 0 ? s.enc_n_heads : m.enc_n_kv_heads;
    s.enc_d_head = m.enc_d_head == 0 ? m.d_model / s.enc_n_heads : m.enc_d_head;
    s.cross_n_heads = m.cross_n_heads == 0 ? m.n_heads : m.cross_n_heads;
    s.cross_n_kv_heads = m.cross_n_kv_heads == 0 ? s.cross_n_heads : m.cross_n_kv_heads;
    s.cross_d_head = m.cross_d_head == 0 ? m.d_model / s.cross_n_heads : m.cross_d_head;
  }
  s.layer_heads = m.layer_heads;
  s.active_heads = m.active_heads;
  s.d_mlp = m.mlp_ratio * m.d_model;
  s.mlp_units = m.mlp_units;
  s.max_seq_len = m.max_seq_len;
  s.positions = m.positions == "sinusoidal" ? Positions::sinusoidal : Positions::learned;
  s.activation = m.activation == "relu" ? Activation::relu : Activation::gelu;
  s.dropout = m.dropout;
  s.norm_eps = m.norm_eps;
  s.tie_embeddings = m.tie_embeddings;
  s.bias = m.bias;
  s.init_std = m.init_std;
  s.n_classes = m.n_classes;
  s.pooling = m.pooling == "mean" ? Pooling::mean : Pooling::first;
  return s;
}

std::string to_toml(const Config& config) {
  std::string out = "# headlab config, resolved: every key, defaults filled in (docs/config.md)\n";
  std::string section;
  for (const KeySpec& spec : schema()) {
    const size_t dot = spec.key.find('.');
    if (spec.key.substr(0, dot) != section) out += "\n[" + (section = spec.key.substr(0, dot)) + "]\n";
    out += spec.key.substr(dot + 1) + " = " + format_field(field_of(spec, config), false) + "\n";
  }
  return out;
}

std::string config_value(const Config& config, const std::string& key) {
  const KeySpec* spec = find_spec(key);
  if (!spec) throw_unknown_key(key, "");
  return format_field(field_of(*spec, config), true);
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const KeySpec& spec : schema()) keys.push_back(spec.key);
  return keys;
}

const std::vector<ConfigKeyInfo>& config_schema() {
  static const std::vector<ConfigKeyInfo> rows = [] {
    const Config defaults;
    std::vector<ConfigKeyInfo> out;
    for (const KeySpec& spec : schema()) {
      const Field field = field_of(spec, defaults);
      out.push_back({spec.key, type_name(field), format_field(field, false), describe_rule(spec.rule), spec.doc});
    }
    return out;
  }();
  return rows;
}

}  // namespace headlab
