#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "headlab/train/run_folder.h"
#include "support/scratch.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {
void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}
}  // namespace

TEST_CASE("run folder helpers list checkpoints by step and keep the last K plus the best", "[train][run_folder]") {
  test::ScratchDir dir("run_folder");
  const std::string run = dir.dir.string();
  auto at = [&](const std::string& name) { return (dir.dir / name).string(); };
  CHECK(list_checkpoints(run).empty());
  CHECK_FALSE(newest_checkpoint(run).has_value());
  fs::create_directories(dir.dir / "checkpoints");
  CHECK(checkpoint_path(run, 1000) == at("checkpoints/step_00001000.h5"));
  for (int64_t step : {100, 200, 300, 400, 500}) write_text(checkpoint_path(run, step), "x");
  write_text(at("checkpoints/step_1000.h5"), "x");  // unpadded names sort by step too
  write_text(at("checkpoints/notes.txt"), "x");

  const pid_t dead = ::fork();  // a process id that is certainly gone
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = at("checkpoints/step_00000600.h5.tmp." + std::to_string(dead));
  const std::string live = at("checkpoints/step_00000700.h5.tmp." + std::to_string(::getpid()));
  write_text(stale, "partial");
  write_text(live, "partial");

  const std::vector<CheckpointFile> all = list_checkpoints(run);
  REQUIRE(all.size() == 6);
  CHECK(all.front().step == 100);
  CHECK(all.back().step == 1000);
  CHECK(all.back().path == at("checkpoints/step_1000.h5"));
  CHECK(newest_checkpoint(run)->step == 1000);

  // Keep the last 2 plus the best (step 200, named through a different spelling of its path).
  const std::string best = at("checkpoints/../checkpoints/step_00000200.h5");
  const std::vector<std::string> deleted = prune_checkpoints(run, 2, best);
  CHECK(deleted.size() == 4);  // steps 100, 300, 400 and the stale temp file
  std::vector<int64_t> kept;
  for (const CheckpointFile& f : list_checkpoints(run)) kept.push_back(f.step);
  CHECK(kept == std::vector<int64_t>{200, 500, 1000});
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(at("checkpoints/notes.txt")));

  // Keeping 0 still never deletes the best.
  prune_checkpoints(run, 0, best);
  CHECK(list_checkpoints(run).size() == 1);
  CHECK(fs::exists(best));
  REQUIRE_THROWS_WITH(prune_checkpoints(run, -1, best), "prune_checkpoints: keep_last=-1 is negative");
}
