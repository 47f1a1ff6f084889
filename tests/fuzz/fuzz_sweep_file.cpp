// libFuzzer target: a sweep file (src/sweep/sweep.cpp: load_sweep, expand_sweep), as
// `headlab sweep FILE` reads it before writing anything. The file is written to
// SCRATCH/experiments/x/grid.toml next to a copy of configs/, so the experiments' own
// `base = "../../configs/..."` resolves; every grid point is then resolved, validated and its
// dataset built. The Bible is a small stand-in file in the scratch cache (and PATH is empty, so
// nothing can run `bible`). Grids of more than 64 points are parsed but not expanded, to keep
// each input fast.
#include <string>

#include "fuzz_support.h"
#include "headlab/sweep/sweep.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  namespace fs = headlab::fuzz::fs;
  const fs::path scratch = headlab::fuzz::scratch_dir();
  fs::create_directories(scratch / "configs");
  for (const auto& entry : fs::directory_iterator(fs::path(HEADLAB_SOURCE_DIR) / "configs"))
    if (entry.path().extension() == ".toml") fs::copy_file(entry.path(), scratch / "configs" / entry.path().filename());
  std::string bible;
  for (int i = 0; i < 200; ++i) bible += "In the beginning God created the heaven and the earth.\n";
  headlab::fuzz::write_bytes(scratch / "cache" / "headlab" / "bible-kjv.txt", bible);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const fuzz::fs::path dir = fuzz::fresh_dir("experiments/x");
  const std::string path = (dir / "grid.toml").string();
  fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  fuzz::expect_only_headlab_errors([&] {
    const SweepSpec spec = load_sweep(path);
    size_t points = 1;
    for (const SweepAxis& axis : spec.grid) {
      points *= axis.values.size();
      if (points > 64) return;
    }
    for (const SweepPoint& p : expand_sweep(spec)) (void)run_folder_name(p.values);
  });
  return 0;
}
