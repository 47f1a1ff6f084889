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

namespace headlab::test {

// A scratch folder with a small, learnable corpus and a tiny base config that trains in a blink.
struct SweepScratch : ScratchDir {
  SweepScratch() : ScratchDir("sweep") {
    write_corpus("corpus.txt", 400);
    write("base.toml",
          "[model]\nd_model = 16\nn_layers = 1\nmax_seq_len = 16\n"
          "[data]\npath = \"" +
              (dir / "corpus.txt").string() +
              "\"\nseq_len = 16\n"
              "[train]\nbatch_size = 4\nsteps = 6\nwarmup_steps = 1\nlr = 3e-3\neval_every = 3\n"
              "eval_batches = 1\nlog_every = 1\ncheckpoint_every = 3\nkeep_checkpoints = 0\n");
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
