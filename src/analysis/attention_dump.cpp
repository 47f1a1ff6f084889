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
#include <span>
#include <utility>

#include "headlab/analysis/word_alignment.h"
#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/data/translation.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace fs = std::filesystem;

std::string attention_dump_stem(const std::string& name) {
  return "attention_example_" + name;
}

namespace {

// One kind's maps as CSV: layer,head,query,k0..k{Tk-1}, Tq rows per head a layer has.
void write_maps_csv(const fs::path& path, const AttentionMaps& m) {
  std::vector<std::string> header = {"layer", "head", "query"};
  for (int64_t s = 0; s < m.n_keys; ++s)  // appended: GCC 12 warns (-Wrestrict, falsely) on "k" + std::to_string(s)
    header.push_back(std::string("k").append(std::to_string(s)));
  CsvWriter maps(header);
  std::vector<std::string> fields;
  for (int64_t l = 0; l < m.n_layers; ++l)
    for (int64_t h = 0; h < m.layer_heads[l]; ++h)
      for (int64_t t = 0; t < m.n_queries; ++t) {
        fields = {std::to_string(l), std::to_string(h), std::to_string(t)};
        const double* row = m.probs.data() + ((l * m.n_heads + h) * m.n_queries + t) * m.n_keys;
        for (int64_t s = 0; s < m.n_keys; ++s) fields.push_back(csv_number("%.5g", row[s]));
        maps.row(fields);
      }
  write_file_atomically(path, maps.text());
}

}  // namespace

void write_attention_dump(const std::string& dir_name, const std::string& name, const AttentionExample& a,
                          const Dataset& dataset, int32_t pad_token, const std::string& checkpoint,
                          const std::string& split, const std::vector<uint8_t>& gold_alignment) {
  const fs::path dir(dir_name);
  const int64_t L = a.n_layers, H = a.n_heads, T_ = a.seq_len, S = a.row.source_len;
  const Batch& r = a.row;
  const std::string stem = attention_dump_stem(name);
  write_maps_csv(dir / (stem + ".csv"), a.self_attention());
  if (!a.encoder.empty()) write_maps_csv(dir / (stem + "_encoder.csv"), a.encoder);
  if (!a.cross.empty()) write_maps_csv(dir / (stem + "_cross.csv"), a.cross);

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
  if (!r.source_tokens.empty()) {
    CsvWriter source({"position", "token", "text", "real"});
    for (int64_t s = 0; s < S; ++s)
      source.row({std::to_string(s), std::to_string(r.source_tokens[s]), dataset.token_label(r.source_tokens[s]),
                  field(r.source_padding, s)});
    write_file_atomically(dir / (stem + "_source_tokens.csv"), source.text());
  }
  if (!gold_alignment.empty()) {
    HEADLAB_CHECK(static_cast<int64_t>(gold_alignment.size()) == T_ * S && !a.cross.empty(),
                  stem << ": a gold alignment of " << gold_alignment.size() << " cells for " << T_ << " x " << S
                       << " cross-attention maps");
    CsvWriter gold({"target_position", "source_position"});
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t s = 0; s < S; ++s)
        if (gold_alignment[t * S + s]) gold.row({std::to_string(t), std::to_string(s)});
    write_file_atomically(dir / (stem + "_gold_alignment.csv"), gold.text());
  }

  CheckpointWriter w(FileKind::attention);
  w.add_array("attention", a.probs.data(), {L, H, T_, T_});
  for (const auto& [array, m] : {std::pair{"encoder_attention", &a.encoder}, std::pair{"cross_attention", &a.cross}})
    if (!m->empty()) w.add_array(array, m->probs.data(), {m->n_layers, m->n_heads, m->n_queries, m->n_keys});
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
  add_ints("source_tokens", r.source_tokens);
  if (!r.key_padding.empty()) w.add_array("key_padding", r.key_padding.data(), {T_});
  if (!r.is_delimiter.empty()) w.add_array("is_delimiter", r.is_delimiter.data(), {T_});
  if (!r.source_padding.empty()) w.add_array("source_padding", r.source_padding.data(), {S});
  if (!gold_alignment.empty()) w.add_array("gold_alignment", gold_alignment.data(), {T_, S});
  w.set_string_attr("contents", "attention maps of one example (headlab analyze --dump-example or --prompt)");
  w.set_string_attr("checkpoint", checkpoint);
  w.set_string_attr("split", split);  // or "prompt"
  w.set_string_attr("example", name);
  w.commit((dir / (stem + ".h5")).string());
}

std::vector<uint8_t> example_gold_alignment(const Dataset& dataset, Split split, int64_t example, int64_t batch_size,
                                            const Batch& row) {
  const TranslationDataset* data = dataset.translation();
  if (!data) return {};
  const Dataset::ExamplePosition at = data->example_position(split, example, batch_size);
  const int64_t sentence = data->batch_sentences(split, at.batch)[static_cast<size_t>(at.row)];
  const TranslationSentence& s = data->sentences(split)[static_cast<size_t>(sentence)];
  if (s.pair.source_tags.empty() && s.pair.target_tags.empty()) return {};  // plain parallel files
  // The row attention_example filled holds this verse: <s> y1..yn and x1..xm </s>, then padding.
  auto holds = [](const std::vector<int32_t>& row_ids, size_t from, const std::vector<int32_t>& ids) {
    return row_ids.size() >= from + ids.size() && std::equal(ids.begin(), ids.end(), row_ids.begin() + from);
  };
  HEADLAB_CHECK(
      holds(row.tokens, 1, s.target_ids) && holds(row.source_tokens, 0, s.source_ids),
      "gold alignment: example " << example << "'s row does not hold " << data->sentence_origin(split, sentence));
  const VerseTokenWords words = verse_token_words(*data->tokenizer(), s);
  if (words.empty()) return {};
  return gold_token_matrix(gold_links(s.pair), words, row.seq_len, row.source_len);
}

namespace {

// One kind's maps from a .h5 dataset [L, H, Tq, Tk]; `square` for self-attention.
AttentionMaps read_maps_h5(const CheckpointReader& h5, const char* array, bool square) {
  AttentionMaps m;
  const Shape shape = h5.shape(array);
  HEADLAB_CHECK(shape.rank == 4 && shape[2] > 0 && shape[3] > 0 && (!square || shape[2] == shape[3]),
                h5.path() << ": " << array << " is not [L, H, " << (square ? "T, T" : "Tq, Tk") << "] with T > 0");
  m.n_layers = shape[0], m.n_heads = shape[1], m.n_queries = shape[2], m.n_keys = shape[3];
  m.probs = h5.read_array<double>(array);
  return m;
}

// One kind's maps from a CSV (layer,head,query,k0..): Tk from the header, Tq = `n_queries` (-1: Tk).
AttentionMaps read_maps_csv(const fs::path& path, const std::string& file, int64_t n_queries) {
  AttentionMaps m;
  const CsvTable table = read_csv(path);
  const std::vector<std::string>& header = table.header;
  HEADLAB_CHECK(header.size() > 3 && header[0] == "layer", path.string()
                                                               << ": not an attention dump (layer,head,query,k0,...)");
  m.n_keys = static_cast<int64_t>(header.size()) - 3;
  m.n_queries = n_queries < 0 ? m.n_keys : n_queries;
  auto index = [&](size_t r, size_t i) {  // layer, head or query of row r: a count
    const std::string& cell = table.rows[r][i];
    char* end = nullptr;
    const long long v = std::strtoll(cell.c_str(), &end, 10);
    HEADLAB_CHECK(*end == '\0' && !cell.empty() && v >= 0 && v <= INT32_MAX,
                  file << ": row " << r + 1 << " has '" << cell << "' for " << header[i] << ", not a count");
    return static_cast<int64_t>(v);
  };
  for (size_t r = 0; r < table.rows.size(); ++r) {
    m.n_layers = std::max<int64_t>(m.n_layers, index(r, 0) + 1);
    m.n_heads = std::max<int64_t>(m.n_heads, index(r, 1) + 1);
  }
  const int64_t Tq = m.n_queries, Tk = m.n_keys;
  // The maps are held dense, [L, H, Tq, Tk]: refuse layer and head numbers that the rows cannot
  // back (a dump holds Tq rows per head; a pruned model's narrower layers leave some maps empty),
  // so that an edited file cannot ask for gigabytes (found by tests/fuzz/fuzz_run_folder).
  const int64_t data_values = static_cast<int64_t>(table.rows.size()) * Tk;
  int64_t dense = 0;
  const bool overflow =
      __builtin_mul_overflow(m.n_layers, m.n_heads, &dense) || __builtin_mul_overflow(dense, Tq * Tk, &dense);
  HEADLAB_CHECK(!overflow && dense <= 64 * std::max<int64_t>(data_values, Tq * Tk),
                file << ": its rows number layers up to " << m.n_layers - 1 << " and heads up to " << m.n_heads - 1
                     << " but hold " << table.rows.size() << " rows of " << Tk
                     << " keys: not the attention dump of one model");
  m.probs.assign(static_cast<size_t>(dense), std::nan(""));
  for (size_t r = 0; r < table.rows.size(); ++r) {  // parse_csv made every row Tk + 3 fields
    const int64_t l = index(r, 0), h = index(r, 1), t = index(r, 2);
    HEADLAB_CHECK(t >= 0 && t < Tq, file << ": row " << r + 1 << " has query " << t << " outside [0, " << Tq << ")");
    for (int64_t s = 0; s < Tk; ++s)
      m.probs[((l * m.n_heads + h) * Tq + t) * Tk + s] = std::strtod(table.rows[r][3 + s].c_str(), nullptr);
  }
  return m;
}

// A layer's heads: those whose first row is a probability (the writer leaves absent heads NaN).
void find_layer_heads(AttentionMaps& m) {
  m.layer_heads.clear();
  for (int64_t l = 0; l < m.n_layers; ++l) {
    int64_t n = 0;
    while (n < m.n_heads && !std::isnan(m.probs[((l * m.n_heads + n) * m.n_queries) * m.n_keys])) ++n;
    m.layer_heads.push_back(n);
  }
}

// The text column of a tokens CSV, then the ids for positions it lacks, `n` in all.
std::vector<std::string> read_labels(const fs::path& path, const std::vector<int32_t>& ids, int64_t n) {
  std::vector<std::string> labels;
  if (fs::is_regular_file(path)) {
    const CsvTable table = read_csv(path);
    if (const std::optional<size_t> text = table.find_column("text"))
      for (const std::vector<std::string>& row : table.rows) labels.push_back(row[*text]);
  }
  for (size_t t = labels.size(); t < ids.size(); ++t) labels.push_back(std::to_string(ids[t]));
  labels.resize(static_cast<size_t>(n));
  return labels;
}

// _gold_alignment.csv (target_position,source_position per gold cell) as the [T, S] matrix of `cross`.
std::vector<uint8_t> read_gold_csv(const fs::path& path, const std::string& file, const AttentionMaps& cross) {
  const CsvTable table = read_csv(path, "gold alignment");
  const size_t t_column = table.column("target_position"), s_column = table.column("source_position");
  HEADLAB_CHECK(!cross.empty(), file << ": a gold alignment without cross-attention maps");
  const int64_t T = cross.n_queries, S = cross.n_keys;
  std::vector<uint8_t> gold(static_cast<size_t>(T * S), 0);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::string &t_cell = table.rows[r][t_column], &s_cell = table.rows[r][s_column];
    char *t_end = nullptr, *s_end = nullptr;
    const long long t = std::strtoll(t_cell.c_str(), &t_end, 10), s = std::strtoll(s_cell.c_str(), &s_end, 10);
    HEADLAB_CHECK(
        !t_cell.empty() && !s_cell.empty() && *t_end == '\0' && *s_end == '\0' && t >= 0 && t < T && s >= 0 && s < S,
        file << ": row " << r + 1 << " has (" << t_cell << ", " << s_cell << "), not a cell of the " << T << " x " << S
             << " cross-attention");
    gold[static_cast<size_t>(t * S + s)] = 1;
  }
  return gold;
}

std::vector<int32_t> read_ids(const CheckpointReader& h5, const char* array) {
  if (!h5.has(array)) return {};
  const std::vector<int64_t> ids = h5.read_array<int64_t>(array);
  return {ids.begin(), ids.end()};
}

}  // namespace

AttentionDump read_attention_dump(const std::string& dir_name, const std::string& name) {
  const fs::path dir(dir_name);
  const std::string stem = attention_dump_stem(name);
  AttentionDump dump;
  dump.name = name;
  AttentionExample& a = dump.attention;
  AttentionMaps self;
  std::vector<int32_t> source_ids;
  const fs::path h5_path = dir / (stem + ".h5");
  const bool from_h5 = fs::is_regular_file(h5_path);
  if (from_h5) {
    const CheckpointReader h5(h5_path.string());
    self = read_maps_h5(h5, "attention", true);
    if (h5.has("encoder_attention")) a.encoder = read_maps_h5(h5, "encoder_attention", true);
    if (h5.has("cross_attention")) a.cross = read_maps_h5(h5, "cross_attention", false);
    a.row.tokens = read_ids(h5, "tokens");
    source_ids = read_ids(h5, "source_tokens");
    if (h5.has("gold_alignment")) {
      const Shape shape = h5.shape("gold_alignment");
      HEADLAB_CHECK(shape.rank == 2 && shape[0] == a.cross.n_queries && shape[1] == a.cross.n_keys,
                    h5.path() << ": gold_alignment is not [T, S] of its cross_attention");
      dump.gold_alignment = h5.read_array<uint8_t>("gold_alignment");
    }
  } else {
    self = read_maps_csv(dir / (stem + ".csv"), stem + ".csv", -1);
    if (fs::is_regular_file(dir / (stem + "_encoder.csv")))
      a.encoder = read_maps_csv(dir / (stem + "_encoder.csv"), stem + "_encoder.csv", -1);
    if (fs::is_regular_file(dir / (stem + "_cross.csv")))
      a.cross = read_maps_csv(dir / (stem + "_cross.csv"), stem + "_cross.csv", self.n_queries);
  }
  // The three kinds must agree on T (self, cross queries) and S (encoder, cross keys).
  HEADLAB_CHECK(
      a.cross.empty() || a.cross.n_queries == self.n_queries,
      stem << ": the cross-attention has " << a.cross.n_queries << " queries, the self-attention " << self.n_queries);
  HEADLAB_CHECK(a.cross.empty() || a.encoder.empty() || a.cross.n_keys == a.encoder.n_keys,
                stem << ": the cross-attention has " << a.cross.n_keys << " keys, the encoder's " << a.encoder.n_keys);
  for (AttentionMaps* m : {&self, &a.encoder, &a.cross}) find_layer_heads(*m);
  a.n_layers = self.n_layers, a.n_heads = self.n_heads, a.seq_len = self.n_queries;
  a.layer_heads = std::move(self.layer_heads);
  a.probs = std::move(self.probs);
  dump.token_labels = read_labels(dir / (stem + "_tokens.csv"), a.row.tokens, a.seq_len);
  const int64_t S = !a.encoder.empty() ? a.encoder.n_keys : a.cross.n_keys;
  if (S > 0) dump.source_labels = read_labels(dir / (stem + "_source_tokens.csv"), source_ids, S);
  a.row.source_tokens = std::move(source_ids);
  if (const fs::path gold = dir / (stem + "_gold_alignment.csv"); !from_h5 && fs::is_regular_file(gold))
    dump.gold_alignment = read_gold_csv(gold, stem + "_gold_alignment.csv", a.cross);
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
