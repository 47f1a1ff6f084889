// Where a run keeps its checkpoints, and which it keeps: RUN_DIR/checkpoints/step_<N>.h5 (N
// zero-padded to 8 digits by checkpoint_path; any step_<digits>.h5 is recognised) and
// RUN_DIR/checkpoints/best.h5. Names only: what a file holds is train/checkpointing.h's business.
//   trainer: checkpoint(checkpoint_path(run, step)); prune_checkpoints(run, keep_last, "");
//   resume:  if (auto newest = newest_checkpoint(run)) load(newest->path);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headlab {

struct CheckpointFile {
  int64_t step;
  std::string path;
};
std::string checkpoint_path(const std::string& run_dir, int64_t step);
std::string best_checkpoint_path(const std::string& run_dir);              // RUN_DIR/checkpoints/best.h5
std::vector<CheckpointFile> list_checkpoints(const std::string& run_dir);  // sorted by step
std::optional<CheckpointFile> newest_checkpoint(const std::string& run_dir);
// Deletes every listed checkpoint except the `keep_last` newest and `best_path` (never deleted;
// may be empty), plus stale temp files (step_*.h5.tmp.<pid> whose process is gone). Returns the
// deleted paths.
std::vector<std::string> prune_checkpoints(const std::string& run_dir, int keep_last, const std::string& best_path);

}  // namespace headlab
