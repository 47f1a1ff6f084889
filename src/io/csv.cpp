// CSV quoting, splitting, writing and reading (RFC 4180). One record splitter serves both
// split_csv_line and parse_csv, so a line reads back the same whichever way it is read.
#include "headlab/io/csv.h"

#include <cstdio>

#include "headlab/common/error.h"
#include "headlab/common/files.h"

namespace headlab {

namespace {

// Splits the record starting at text[pos] into `fields` and moves pos past it (past its '\n').
// Counts the line breaks it passes in `line`; returns false for a blank record (spaces and CR
// only) and sets `unclosed` when the text ends inside quotes.
bool split_record(const std::string& text, size_t& pos, int64_t& line, std::vector<std::string>& fields,
                  bool& unclosed) {
  fields.assign(1, std::string());
  bool quoted = false, blank = true;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (quoted) {
      if (c == '"' && pos + 1 < text.size() && text[pos + 1] == '"') {
        fields.back() += '"', ++pos;
      } else if (c == '"') {
        quoted = false;
      } else {
        line += c == '\n';
        fields.back() += c;
      }
    } else if (c == '\n') {
      ++pos, ++line;
      break;
    } else if (c == '"') {
      quoted = true, blank = false;
    } else if (c == ',') {
      fields.emplace_back(), blank = false;
    } else if (c != '\r') {
      fields.back() += c;
      blank = blank && c == ' ';
    }
  }
  unclosed = quoted;
  return !blank;
}

}  // namespace

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_field(fields[i]);
  }
  return out + '\n';
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  size_t pos = 0;
  int64_t lines = 1;
  bool unclosed = false;
  split_record(line, pos, lines, fields, unclosed);
  return fields;
}

std::string csv_number(const char* format, double value) {
  const int n = std::snprintf(nullptr, 0, format, value);  // "%.1f" of 1e300 is 300 digits
  HEADLAB_CHECK(n >= 0, "csv_number: bad format '" << format << "'");
  std::string text(static_cast<size_t>(n), '\0');
  std::snprintf(text.data(), text.size() + 1, format, value);
  return text;
}

CsvWriter::CsvWriter(const std::vector<std::string>& header) : n_columns_(header.size()), text_(csv_line(header)) {}

void CsvWriter::row(const std::vector<std::string>& fields) {
  HEADLAB_CHECK(fields.size() == n_columns_,
                "CsvWriter: a row of " << fields.size() << " fields under a header of " << n_columns_);
  text_ += csv_line(fields);
}

std::optional<size_t> CsvTable::find_column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  return std::nullopt;
}

size_t CsvTable::column(const std::string& name) const {
  if (const std::optional<size_t> i = find_column(name)) return *i;
  const std::string missing = "no '" + name + "' column in its header";
  throw Error(origin + ": " + (what.empty() ? missing : "not a " + what + " (" + missing + ")"));
}

std::string CsvTable::row_text(size_t r) const {
  std::string text = csv_line(rows.at(r));
  text.pop_back();
  return text;
}

CsvTable parse_csv(const std::string& text, const std::string& origin, const std::string& what) {
  CsvTable table;
  table.origin = origin;
  table.what = what;
  size_t pos = 0;
  int64_t line = 1;
  std::vector<std::string> fields;
  while (pos < text.size()) {
    const int64_t first_line = line;
    bool unclosed = false;
    const bool blank = !split_record(text, pos, line, fields, unclosed);
    HEADLAB_CHECK(!unclosed, origin << ":" << first_line << ": a quoted field is not closed");
    if (blank) continue;
    if (table.header.empty()) {
      table.header = std::move(fields);
      continue;
    }
    HEADLAB_CHECK(fields.size() == table.header.size(), origin << ":" << first_line << ": " << fields.size()
                                                               << " fields, the header has " << table.header.size());
    table.rows.push_back(std::move(fields));
    table.lines.push_back(first_line);
  }
  return table;
}

CsvTable read_csv(const std::filesystem::path& path, const std::string& what) {
  return parse_csv(read_text_file(path, what.empty() ? "CSV file" : what), path.string(), what);
}

}  // namespace headlab
