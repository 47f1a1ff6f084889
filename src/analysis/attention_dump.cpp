// The attention dump's writer and reader, side by side; the format is described once, in
// include/headlab/analysis/attention_dump.h.
#include "headlab/analysis/attention_dump.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <utility>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace fs = std::filesystem;

std::string attention_dump_stem(const std::string& name) {
  return "attention_example_" + name;
}

void write_attention_dump(const std::string& dir_name, const std::string& name, const AttentionExample& a,
                          const Dataset& dataset, int32_t pad_token, const std::string& checkpoint,
                          const std::string& split) {
  const fs::path dir(dir_name);
  const int64_t L = a.n_layers, H = a.n_heads, T_ = a.seq_len;
  const Batch& r = a.row;
  const std::string stem = attention_dump_stem(name);
  std::vector<std::string> header = {"layer", "head", "query"};
  for (int64_t s = 0; s < T_; ++s)  // appended: GCC 12 warns (-Wrestrict, falsely) on "k" + std::to_string(s)
    header.push_back(std::string("k").append(std::to_string(s)));
  CsvWriter maps(header);
  std::vector<std::string> fields;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < a.layer_heads[l]; ++h)
      for (int64_t t = 0; t < T_; ++t) {
        fields = {std::to_string(l), std::to_string(h), std::to_string(t)};
        const double* row = a.probs.data() + ((l * H + h) * T_ + t) * T_;
        for (int64_t s = 0; s < T_; ++s) fields.push_back(csv_number("%.5g", row[s]));
        maps.row(fields);
      }
  write_file_atomically(dir / (stem + ".csv"), maps.text());

  auto field = [&](const auto& v, int64_t i) {
    return v.empty() ? std::string() : std::to_string(static_cast<int64_t>(v[i]));
  };
  CsvWriter tokens(
      {"position", "token", "text", "real", "target", "label", "gold_head", "gold_antecedent", "is_delimiter"});
  for (int64_t t = 0; t < T_; ++t) {
    tokens.row({std::to_string(t), std::to_string(r.tokens[t]), dataset.token_label(r.tokens[t]),
                r.key_padding.empty() ? (r.tokens[t] == pad_token ? "0" : "1") : field(r.key_padding, t),
                field(r.targets, t), t == 0 ? field(r.labels, 0) : "", field(r.gold_head, t),
                field(r.gold_antecedent, t), field(r.is_delimiter, t)});
  }
  write_file_atomically(dir / (stem + "_tokens.csv"), tokens.text());

  CheckpointWriter w(FileKind::attention);
  w.add_array("attention", a.probs.data(), {L, H, T_, T_});
  auto add_ints = [&](const char* array, const auto& v) {
    if (v.empty()) return;
    std::vector<int64_t> x(v.begin(), v.end());
    w.add_array(array, x.data(), {static_cast<int64_t>(x.size())});
  };
  add_ints("tokens", r.tokens);
  add_ints("targets", r.targets);
  add_ints("labels", r.labels);
  add_ints("gold_head", r.gold_head);
  add_ints("gold_antecedent", r.gold_antecedent);
  if (!r.key_padding.empty()) w.add_array("key_padding", r.key_padding.data(), {T_});
  if (!r.is_delimiter.empty()) w.add_array("is_delimiter", r.is_delimiter.data(), {T_});
  w.set_string_attr("contents", "attention maps of one example (headlab analyze --dump-example or --prompt)");
  w.set_string_attr("checkpoint", checkpoint);
  w.set_string_attr("split", split);  // or "prompt"
  w.set_string_attr("example", name);
  w.commit((dir / (stem + ".h5")).string());
}

namespace {

AttentionExample read_maps_h5(const fs::path& path) {
  AttentionExample a;
  const CheckpointReader h5(path.string());
  const Shape shape = h5.shape("attention");
  HEADLAB_CHECK(shape.rank == 4 && shape[2] == shape[3] && shape[2] > 0,
                h5.path() << ": attention is not [L, H, T, T] with T > 0");
  a.n_layers = shape[0], a.n_heads = shape[1], a.seq_len = shape[2];
  a.probs = h5.read_array<double>("attention");
  if (h5.has("tokens")) {
    const std::vector<int64_t> tokens = h5.read_array<int64_t>("tokens");
    a.row.tokens.assign(tokens.begin(), tokens.end());
  }
  return a;
}

AttentionExample read_maps_csv(const fs::path& path, const std::string& stem) {
  AttentionExample a;
  const CsvTable table = read_csv(path);
  const std::vector<std::string>& header = table.header;
  HEADLAB_CHECK(header.size() > 3 && header[0] == "layer", path.string()
                                                               << ": not an attention dump (layer,head,query,k0,...)");
  a.seq_len = static_cast<int64_t>(header.size()) - 3;
  auto index = [&](size_t r, size_t i) {  // layer, head or query of row r: a count
    const std::string& cell = table.rows[r][i];
    char* end = nullptr;
    const long long v = std::strtoll(cell.c_str(), &end, 10);
    HEADLAB_CHECK(*end == '\0' && !cell.empty() && v >= 0 && v <= INT32_MAX,
                  stem << ".csv: row " << r + 1 << " has '" << cell << "' for " << header[i] << ", not a count");
    return static_cast<int64_t>(v);
  };
  for (size_t r = 0; r < table.rows.size(); ++r) {
    a.n_layers = std::max<int64_t>(a.n_layers, index(r, 0) + 1);
    a.n_heads = std::max<int64_t>(a.n_heads, index(r, 1) + 1);
  }
  const int64_t T = a.seq_len;
  // The maps are held dense, [L, H, T, T]: refuse layer and head numbers that the rows cannot
  // back (a dump holds T rows per head; a pruned model's narrower layers leave some maps empty),
  // so that an edited file cannot ask for gigabytes (found by tests/fuzz/fuzz_run_folder).
  const int64_t data_values = static_cast<int64_t>(table.rows.size()) * T;
  int64_t dense = 0;
  const bool overflow =
      __builtin_mul_overflow(a.n_layers, a.n_heads, &dense) || __builtin_mul_overflow(dense, T * T, &dense);
  HEADLAB_CHECK(!overflow && dense <= 64 * std::max<int64_t>(data_values, T * T),
                stem << ".csv: its rows number layers up to " << a.n_layers - 1 << " and heads up to " << a.n_heads - 1
                     << " but hold " << table.rows.size() << " rows of " << T
                     << " keys: not the attention dump of one model");
  a.probs.assign(static_cast<size_t>(dense), std::nan(""));
  for (size_t r = 0; r < table.rows.size(); ++r) {  // parse_csv made every row T + 3 fields
    const int64_t l = index(r, 0), h = index(r, 1), t = index(r, 2);
    HEADLAB_CHECK(t >= 0 && t < T, stem << ".csv: row " << r + 1 << " has query " << t << " outside [0, " << T << ")");
    for (int64_t s = 0; s < T; ++s)
      a.probs[((l * a.n_heads + h) * T + t) * T + s] = std::strtod(table.rows[r][3 + s].c_str(), nullptr);
  }
  return a;
}

}  // namespace

AttentionDump read_attention_dump(const std::string& dir_name, const std::string& name) {
  const fs::path dir(dir_name);
  const std::string stem = attention_dump_stem(name);
  AttentionDump dump;
  dump.name = name;
  AttentionExample& a = dump.attention;
  a = fs::is_regular_file(dir / (stem + ".h5")) ? read_maps_h5(dir / (stem + ".h5"))
                                                : read_maps_csv(dir / (stem + ".csv"), stem);
  const int64_t T = a.seq_len;
  for (int64_t l = 0; l < a.n_layers; ++l) {  // a layer's heads: those whose first row is a probability
    int64_t n = 0;
    while (n < a.n_heads && !std::isnan(a.probs[((l * a.n_heads + n) * T) * T])) ++n;
    a.layer_heads.push_back(n);
  }
  // Token labels from _tokens.csv's text column; else the token ids.
  std::vector<std::string>& labels = dump.token_labels;
  const fs::path tokens = dir / (stem + "_tokens.csv");
  if (fs::is_regular_file(tokens)) {
    const CsvTable table = read_csv(tokens);
    if (const std::optional<size_t> text = table.find_column("text"))
      for (const std::vector<std::string>& row : table.rows) labels.push_back(row[*text]);
  }
  for (size_t t = labels.size(); t < a.row.tokens.size(); ++t) labels.push_back(std::to_string(a.row.tokens[t]));
  labels.resize(a.seq_len);
  return dump;
}

std::vector<std::string> attention_dump_names(const std::string& dir) {
  static const std::regex pattern(R"(attention_example_(\d+|prompt)\.(h5|csv))");
  std::set<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, pattern)) found.insert({m[1] == "prompt" ? INT64_MAX : std::stoll(m[1]), m[1].str()});
  }
  std::vector<std::string> names;
  for (const auto& f : found) names.push_back(f.second);
  return names;
}

}  // namespace headlab
