// CSV, the one implementation behind every table headlab writes and reads (metrics.csv, heads.csv,
// heads_similarity.csv, attention dumps, prune.csv, grid.csv, results.csv): RFC 4180 quoting, a
// header on the first line, one row per record. Writers format their own numbers (csv_number), so
// each file's bytes are fixed by its writer alone; readers find columns by name.
//   CsvWriter w({"step", "val_loss"});
//   w.row({std::to_string(step), csv_number("%.6g", loss)});
//   write_file_atomically(path, w.text());
//   const CsvTable t = read_csv(path);
//   for (const auto& row : t.rows) use(row[t.column("val_loss")]);
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headlab {

// `text` as one CSV field: unchanged, or in double quotes (with " doubled) when it holds a comma,
// a quote, CR or LF.
std::string csv_field(const std::string& text);

// The fields as one CSV line: each through csv_field, joined by commas, ending in '\n'.
std::string csv_line(const std::vector<std::string>& fields);

// One record back into its fields; CR outside quotes is dropped. Inverse of csv_line.
std::vector<std::string> split_csv_line(const std::string& line);

// printf(format, value) as a string: writers choose each column's format ("%.6g", "%.1f").
std::string csv_number(const char* format, double value);

// A CSV file's text built row by row; every row has one field per header column.
class CsvWriter {
 public:
  explicit CsvWriter(const std::vector<std::string>& header);
  void row(const std::vector<std::string>& fields);  // throws unless fields.size() == columns
  const std::string& text() const { return text_; }

 private:
  size_t n_columns_;
  std::string text_;
};

// A CSV file read whole: the header and every row, each row exactly as wide as the header.
struct CsvTable {
  std::string origin;               // the file, for errors
  std::string what;                 // what the file should be ("headlab metrics file"), for the missing-column error
  std::vector<std::string> header;  // empty for a file with no lines
  std::vector<std::vector<std::string>> rows;  // in file order
  std::vector<int64_t> lines;                  // the file line each row starts on

  std::optional<size_t> find_column(const std::string& name) const;
  // Throws one line naming the file and the column: "<origin>: no 'val_loss' column in its header"
  // (with `what`: "<origin>: not a <what> (no 'val_loss' column in its header)").
  size_t column(const std::string& name) const;
  // Row r as a CSV line without its '\n', for error messages.
  std::string row_text(size_t r) const;
};

// Parses CSV text. Blank lines (spaces and CR only) are skipped; a quoted field may span lines. A
// row with more or fewer fields than the header, or an unclosed quote, is one error line naming
// `origin` and the line: "<origin>:7: 3 fields, the header has 4".
CsvTable parse_csv(const std::string& text, const std::string& origin, const std::string& what = "");
// The same on a file; a missing or unreadable one is "cannot read <what> '<path>'".
CsvTable read_csv(const std::filesystem::path& path, const std::string& what = "");

}  // namespace headlab
