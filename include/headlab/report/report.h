// The interactive report: one self-contained HTML file of a run or sweep folder (docs/report.md).
// gather_report() reads what the folder holds (config.toml, metrics.csv, heads.csv, prune/*/prune.csv,
// headlab circuits' CSV files, attention_example_*.{h5,csv} + _tokens.csv; for a sweep grid.csv, results.csv,
// summary.md and every run folder) into one JSON document; report_html() puts it into the page template, which is
// compiled into the binary (src/report/report.html, embedded by cmake/embed_text.cmake), so an installed headlab needs
// no shared file for it. Attention maps are quantised to one byte per probability (round(255 p)), the lower triangle
// only for causal maps, compressed with zlib and base64-encoded per head; the page decodes a head when it is first
// drawn.
//   std::string json = gather_report("runs/default", {});
//   write_file_atomically("runs/default/report.html", report_html(json, "default"));
#pragma once

#include <string>
#include <vector>

#include "headlab/analysis/heads.h"

namespace headlab {

// One attention map set not read from the folder (headlab report --prompt): the example and a
// label per token (source_labels: per source token, for an encoder_decoder's maps).
struct ExtraExample {
  std::string name;  // "prompt"
  AttentionExample attention;
  std::vector<std::string> token_labels;
  std::vector<std::string> source_labels;
};

// The JSON document of a run folder (metrics.csv, or analysis or prune files) or a sweep folder
// (grid.csv); `extra` examples are added to the run (for a sweep: refused). Throws headlab::Error
// naming the folder when it is missing or holds neither.
std::string gather_report(const std::string& folder, const std::vector<ExtraExample>& extra);

// The page: the template with `json` and `title` filled in.
std::string report_html(const std::string& json, const std::string& title);

// Helpers, public for the tests.
std::string base64_encode(const std::vector<unsigned char>& bytes);
// One head's map [rows, cols] (row-major probabilities) as bytes round(255 p): rows 0..rows-1,
// the first t + 1 entries of row t when `causal` (a square map), else all cols.
std::vector<unsigned char> quantise_map(const double* probs, int64_t rows, int64_t cols, bool causal);
// zlib's compress2 (the zlib format, which the browser's DecompressionStream("deflate") reads).
std::vector<unsigned char> deflate_bytes(const std::vector<unsigned char>& bytes);

}  // namespace headlab
