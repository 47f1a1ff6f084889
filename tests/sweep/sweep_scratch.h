// What the sweep tests share: a scratch folder with a tiny base config, and results.csv read back.
//   SweepScratch s;  s.write("grid.toml", "base = \"base.toml\"\n[grid]\n\"train.seed\" = [0, 1]\n");
//   CHECK(read_results(out / "results.csv")[0].at("n_seeds") == "2");
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/io/csv.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

namespace headlab::test {

// A scratch folder with a small, learnable corpus and base.toml, the tests' tiny config for it
// (tiny_config.h) with 6 steps at lr 3e-3, evaluated and checkpointed every 3.
struct SweepScratch : ScratchDir {
  SweepScratch() : ScratchDir("sweep") {
    Config c = tiny_text_config(write_corpus("corpus.txt", 400));
    c.train.steps = 6;
    c.train.lr = 3e-3;
    c.train.eval_every = c.train.checkpoint_every = 3;
    write_config("base.toml", c);
  }
};

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// results.csv rows as column -> value.
inline std::vector<std::map<std::string, std::string>> read_results(const std::filesystem::path& path) {
  const CsvTable table = read_csv(path);
  REQUIRE(!table.header.empty());
  std::vector<std::map<std::string, std::string>> rows;
  for (const std::vector<std::string>& fields : table.rows) {
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < fields.size(); ++c) row[table.header[c]] = fields[c];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace headlab::test
