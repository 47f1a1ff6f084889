// The one tiny training setup the tests start from, so that "a small run" means the same thing
// everywhere and a new config key needs no edits across test files. Tests change the fields
// they are about; tests that run the binary write it with ScratchDir::write_config.
//   Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 600));
//   c.train.steps = 6;   const fs::path file = s.write_config("tiny.toml", c);
#pragma once

#include <filesystem>

#include "headlab/io/config.h"

namespace headlab::test {

// A byte-level decoder on `corpus`: d_model 16, 2 heads, 1 layer, T = 16, batch 4, 4 steps
// (warm-up 1) at the default lr, evaluated (1 batch) and checkpointed every 2 steps, every
// checkpoint kept, a metrics row every step, one thread.
Config tiny_text_config(const std::filesystem::path& corpus);

}  // namespace headlab::test
