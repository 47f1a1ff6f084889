#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "support/scratch.h"

using namespace headlab;
using Fields = std::vector<std::string>;

TEST_CASE("csv fields are quoted only when they hold a comma, a quote, CR or LF", "[io][csv]") {
  CHECK(csv_field("plain text 1.5") == "plain text 1.5");
  CHECK(csv_field("") == "");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("cr\r") == "\"cr\r\"");
  CHECK(csv_line({"run", "data.offsets", "[1, 3]"}) == "run,data.offsets,\"[1, 3]\"\n");
  CHECK(csv_number("%.6g", 0.1234567) == "0.123457");
  CHECK(csv_number("%.1f", 1050) == "1050.0");
  CHECK(csv_number("%.1f", 1e100).size() == 103);  // never cut short
}

TEST_CASE("commas, quotes and newlines round-trip through the writer and the reader", "[io][csv]") {
  const std::vector<Fields> rows = {
      {"a,b", "say \"hi\"", "two\nlines"},
      {"", "\"", ",,"},
      {"\r\n", " spaced ", "plain"},
  };
  CsvWriter writer({"first", "second,with comma", "third"});
  for (const Fields& row : rows) writer.row(row);
  const CsvTable table = parse_csv(writer.text(), "mem.csv");
  CHECK(table.header == Fields{"first", "second,with comma", "third"});
  REQUIRE(table.rows.size() == rows.size());
  CHECK(table.rows[0] == rows[0]);
  CHECK(table.rows[1] == rows[1]);
  CHECK(table.rows[2][1] == " spaced ");
  CHECK(table.rows[2][0] == "\r\n");                    // CR inside quotes is kept
  CHECK(table.lines == std::vector<int64_t>{2, 4, 5});  // the first row spans lines 2 and 3
  CHECK(table.row_text(0) + "\n" == csv_line(rows[0]));
  for (const Fields& row : {rows[0], rows[1]}) {
    std::string line = csv_line(row);
    line.pop_back();
    CHECK(split_csv_line(line) == row);
  }
  CHECK_THROWS_WITH(writer.row({"too", "few"}), "CsvWriter: a row of 2 fields under a header of 3");
}

TEST_CASE("a csv table finds columns by name; a missing one names the file and the column", "[io][csv]") {
  test::ScratchDir s("csv");
  const auto path = s.write("metrics.csv", "step,val_loss\r\n\n  \n1,2.5\r\n2,\n");
  const CsvTable table = read_csv(path);
  CHECK(table.column("val_loss") == 1);
  CHECK_FALSE(table.find_column("tokens").has_value());
  REQUIRE(table.rows.size() == 2);  // blank lines (spaces, CR) are skipped
  CHECK(table.rows[0] == Fields{"1", "2.5"});
  CHECK(table.rows[1] == Fields{"2", ""});
  CHECK(table.lines == std::vector<int64_t>{4, 5});
  REQUIRE_THROWS_MATCHES(table.column("tokens"), Error,
                         Catch::Matchers::Message(path.string() + ": no 'tokens' column in its header"));
  const CsvTable named = read_csv(path, "headlab metrics file");
  REQUIRE_THROWS_MATCHES(
      named.column("tokens"), Error,
      Catch::Matchers::Message(path.string() + ": not a headlab metrics file (no 'tokens' column in its header)"));
  const CsvTable empty = parse_csv("", "empty.csv");
  CHECK(empty.header.empty());
  CHECK(empty.rows.empty());
  REQUIRE_THROWS_MATCHES(read_csv(s.dir / "missing.csv"), Error,
                         Catch::Matchers::Message("cannot read CSV file '" + (s.dir / "missing.csv").string() + "'"));
}

TEST_CASE("a ragged row or an unclosed quote is one error naming the file and the line", "[io][csv]") {
  REQUIRE_THROWS_MATCHES(parse_csv("a,b,c\n1,2,3\n\n4,5\n", "grid.csv"), Error,
                         Catch::Matchers::Message("grid.csv:4: 2 fields, the header has 3"));
  REQUIRE_THROWS_MATCHES(parse_csv("a,b\n1,2,3\n", "grid.csv"), Error,
                         Catch::Matchers::Message("grid.csv:2: 3 fields, the header has 2"));
  REQUIRE_THROWS_MATCHES(parse_csv("a,b\n1,\"2\n3,4\n", "grid.csv"), Error,
                         Catch::Matchers::Message("grid.csv:2: a quoted field is not closed"));
}
