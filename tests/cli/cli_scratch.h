// What the cli tests share: a scratch folder holding the tests' tiny text config, and a line count.
//   CliScratch s;  run_headlab({"train", s.config.string(), "--out", (s.dir / "run").string()}, s.dir / "log");
#pragma once

#include <filesystem>
#include <sstream>
#include <string>

#include "support/scratch.h"
#include "support/tiny_config.h"

namespace headlab::test {

struct CliScratch : ScratchDir {
  std::filesystem::path config;
  CliScratch() : ScratchDir("cli") {
    Config c = tiny_text_config(write_corpus("corpus.txt", 600));
    config = write_config("tiny.toml", c);
  }
};

inline int count_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace headlab::test
