// headlab report's data: what a run or sweep folder holds, read into one JSON document for the
// page (src/report/report.html reads it; docs/report.md lists the fields). CSV files go in as
// {"columns": [...], "rows": [[...], ...]} with numbers as numbers and empty cells as null, so
// the page, not this file, decides what to draw from each column.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "headlab/analysis/attention_dump.h"
#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/csv.h"
#include "headlab/io/json.h"
#include "headlab/io/provenance.h"
#include "headlab/report/report.h"
#include "headlab/sweep/sweep.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

// out += ",item" (or "item" for the first of a list).
void append_item(std::string& out, bool comma, const std::string& item) {
  if (comma) out += ',';
  out += item;
}

// A CSV cell: a number when all of it parses as one, null when empty, else a string.
std::string json_cell(const std::string& text) {
  if (text.empty()) return "null";
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() + text.size() && text.find_first_of("xXnN") == std::string::npos) return json_number(v);
  return json_string(text);
}

std::string csv_json(const fs::path& path) {
  const CsvTable table = read_csv(path);
  if (table.header.empty()) return "null";
  std::string out = "{\"columns\":[";
  for (size_t i = 0; i < table.header.size(); ++i) append_item(out, i > 0, json_string(table.header[i]));
  out += "],\"rows\":[";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    out += r > 0 ? ",[" : "[";
    for (size_t i = 0; i < table.header.size(); ++i) append_item(out, i > 0, json_cell(table.rows[r][i]));
    out += "]";
  }
  return out + "]}";
}

std::string optional_csv(const fs::path& path) {
  return fs::is_regular_file(path) ? csv_json(path) : "null";
}
std::string optional_text(const fs::path& path) {
  return fs::is_regular_file(path) ? json_string(read_text_file(path, "file")) : "null";
}

std::string list_json(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) append_item(out, i > 0, json_string(items[i]));
  return out + "]";
}

// One kind of attention's maps of an example, one base64 string of zlib-compressed bytes per head
// (l * n_heads + h; null for a head the layer lacks). T queries (labelled `queries`) x S keys
// (`keys`, written only when they differ): the viewer draws a cross-attention map like a
// self-attention one. `gold` [T, S] (a cross map's gold alignment) goes in as its cells [t, s].
std::string maps_json(const std::string& name, const char* kind, const AttentionMaps& a,
                      const std::vector<std::string>& queries, const std::vector<std::string>& keys,
                      const std::vector<uint8_t>& gold = {}) {
  const int64_t L = a.n_layers, H = a.n_heads, T = a.n_queries, S = a.n_keys;
  bool causal = T == S;
  for (size_t i = 0; i < a.probs.size() && causal; ++i) {
    const int64_t s = static_cast<int64_t>(i % S), t = static_cast<int64_t>(i / S % T);
    causal = s <= t || a.probs[i] == 0 || std::isnan(a.probs[i]);
  }
  std::vector<int64_t> layer_heads = a.layer_heads;
  if (layer_heads.empty()) layer_heads.assign(L, H);
  std::string out = "{\"name\":" + json_string(name) + ",\"n_layers\":" + std::to_string(L) +
                    ",\"n_heads\":" + std::to_string(H) + ",\"T\":" + std::to_string(T) +
                    ",\"causal\":" + (causal ? "true" : "false") + ",\"encoding\":\"deflate\",\"layer_heads\":[";
  for (int64_t l = 0; l < L; ++l) append_item(out, l > 0, std::to_string(layer_heads[l]));
  out += "],\"tokens\":" + list_json(queries) + ",\"kind\":" + json_string(kind) + ",\"S\":" + std::to_string(S);
  if (keys != queries) out += ",\"key_tokens\":" + list_json(keys);  // else the page takes the queries'
  if (!gold.empty()) {
    out += ",\"gold\":[";
    bool first = true;
    for (size_t i = 0; i < gold.size(); ++i)
      if (gold[i]) {
        // appended: GCC 12 warns (-Wrestrict, falsely) on "[" + std::to_string(...)
        append_item(out, !first, std::string("[").append(std::to_string(i / S) + "," + std::to_string(i % S)) + "]");
        first = false;
      }
    out += "]";
  }
  out += ",\"heads\":[";
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const double* map = a.probs.data() + (l * H + h) * T * S;
      append_item(
          out, l + h > 0,
          h < layer_heads[l] ? json_string(base64_encode(deflate_bytes(quantise_map(map, T, S, causal)))) : "null");
    }
  return out + "]}";
}

// An example's entries of the viewer's menu: its self-attention ("3"), and an encoder_decoder's
// encoder ("3 encoder", source x source) and cross-attention ("3 cross", target x source, with
// the gold alignment when the dump has one).
std::string example_json(const std::string& name, const AttentionExample& a, const std::vector<std::string>& labels,
                         const std::vector<std::string>& source_labels, const std::vector<uint8_t>& gold) {
  std::string out = maps_json(name, attention_kind_name(AttentionKind::dec), a.self_attention(), labels, labels);
  if (!a.encoder.empty())
    append_item(
        out, true,
        maps_json(name + " encoder", attention_kind_name(AttentionKind::enc), a.encoder, source_labels, source_labels));
  if (!a.cross.empty())
    append_item(
        out, true,
        maps_json(name + " cross", attention_kind_name(AttentionKind::cross), a.cross, labels, source_labels, gold));
  return out;
}

// What headlab circuits wrote into the folder (docs/circuits.md), each file or null.
constexpr const char* kCircuitFiles[] = {"detectors",      "composition",   "ov_copying", "patching_heads",
                                         "patching_resid", "path_patching", "dla",        "logit_lens"};

std::string circuits_json(const fs::path& dir) {
  std::string out = "{";
  bool first = true;
  for (const char* file : kCircuitFiles) {
    append_item(out, !first, json_string(file) + ":" + optional_csv(dir / (std::string(file) + ".csv")));
    first = false;
  }
  return out + "}";
}

bool has_circuit_files(const fs::path& dir) {
  return std::any_of(std::begin(kCircuitFiles), std::end(kCircuitFiles),
                     [&](const char* file) { return fs::is_regular_file(dir / (std::string(file) + ".csv")); });
}

std::string run_json(const fs::path& dir, const std::string& name, const std::vector<ExtraExample>& extra) {
  std::string out =
      "{\"name\":" + json_string(name) + ",\"path\":" + json_string(dir.string()) +
      ",\"config\":" + optional_text(dir / "config.toml") + ",\"metrics\":" + optional_csv(dir / "metrics.csv") +
      ",\"heads\":" + optional_csv(dir / "heads.csv") + ",\"units\":" + optional_csv(dir / "units.csv") +
      ",\"similarity\":" + optional_csv(dir / "heads_similarity.csv") + ",\"circuits\":" + circuits_json(dir);
  std::vector<std::string> checkpoints;
  if (fs::is_directory(dir / "checkpoints"))
    for (const auto& entry : fs::directory_iterator(dir / "checkpoints"))
      if (entry.path().extension() == ".h5") checkpoints.push_back(entry.path().filename().string());
  std::sort(checkpoints.begin(), checkpoints.end());
  out += ",\"checkpoints\":" + list_json(checkpoints) + ",\"prune\":[";
  std::vector<std::string> prune_dirs;
  if (fs::is_regular_file(dir / "prune.csv")) prune_dirs.push_back(".");
  if (fs::is_directory(dir / "prune"))
    for (const auto& entry : fs::directory_iterator(dir / "prune"))
      if (fs::is_regular_file(entry.path() / "prune.csv")) prune_dirs.push_back(entry.path().filename().string());
  std::sort(prune_dirs.begin(), prune_dirs.end());
  for (size_t i = 0; i < prune_dirs.size(); ++i) {
    const fs::path csv = prune_dirs[i] == "." ? dir / "prune.csv" : dir / "prune" / prune_dirs[i] / "prune.csv";
    append_item(
        out, i > 0,
        "{\"name\":" + json_string(prune_dirs[i] == "." ? name : prune_dirs[i]) + ",\"csv\":" + csv_json(csv) + "}");
  }
  out += "],\"examples\":[";
  bool first = true;
  for (const std::string& example : attention_dump_names(dir.string())) {
    const AttentionDump d = read_attention_dump(dir.string(), example);
    append_item(out, !first, example_json(d.name, d.attention, d.token_labels, d.source_labels, d.gold_alignment));
    first = false;
  }
  for (const ExtraExample& e : extra) {
    append_item(out, !first, example_json(e.name, e.attention, e.token_labels, e.source_labels, {}));
    first = false;
  }
  return out + "]}";
}

std::string generated_json(const std::string& folder) {
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::string out = "{\"folder\":" + json_string(folder) + ",\"date\":" + json_string(when);
  for (const ProvenanceField& f : provenance()) append_item(out, true, json_string(f.key) + ":" + json_string(f.value));
  return out + "}";
}

}  // namespace

std::string gather_report(const std::string& folder, const std::vector<ExtraExample>& extra) {
  std::error_code ec;
  HEADLAB_CHECK(fs::is_directory(folder, ec), "no such folder: " << folder);
  const fs::path dir(folder);
  fs::path normal = fs::absolute(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "runs/x/"
  const std::string name = normal.filename().empty() ? folder : normal.filename().string();
  const std::string head = "{\"generated\":" + generated_json(folder) + ",\"name\":" + json_string(name);
  if (fs::is_regular_file(dir / "grid.csv")) {
    HEADLAB_CHECK(extra.empty(), folder << " is a sweep folder: --prompt needs a run folder (one of its runs)");
    aggregate_sweep(folder);  // as headlab plot does: the tables agree with the runs' metrics
    std::string out = head + ",\"kind\":\"sweep\",\"grid\":" + csv_json(dir / "grid.csv") +
                      ",\"results\":" + optional_csv(dir / "results.csv") +
                      ",\"summary\":" + optional_text(dir / "summary.md") + ",\"runs\":[";
    const CsvTable grid = read_csv(dir / "grid.csv");
    const size_t run = grid.column("run");
    bool first = true;
    for (const std::vector<std::string>& row : grid.rows) {
      if (!fs::is_directory(dir / row[run], ec)) continue;
      append_item(out, !first, run_json(dir / row[run], row[run], {}));
      first = false;
    }
    return out + "]}";
  }
  const bool has_run_files = fs::is_regular_file(dir / "metrics.csv") || fs::is_regular_file(dir / "heads.csv") ||
                             fs::is_regular_file(dir / "prune.csv") || fs::is_directory(dir / "prune") ||
                             !attention_dump_names(dir.string()).empty() || has_circuit_files(dir);
  HEADLAB_CHECK(has_run_files || !extra.empty(),
                folder << " is not a run or sweep folder: it holds no metrics.csv, grid.csv, heads.csv, "
                          "attention_example_*, prune.csv, prune/ or headlab circuits' files");
  return head + ",\"kind\":\"run\",\"runs\":[" + run_json(dir, name, extra) + "]}";
}

}  // namespace headlab
