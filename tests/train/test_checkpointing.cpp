#include <catch2/catch.hpp>
#include <filesystem>

#include "headlab/io/checkpoint.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/hdf5_edit.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// A file shaped like analyze's heads.h5: the analysed checkpoint's config and per-head arrays.
void write_heads_file(const std::string& path, const Config& config, FileKind kind) {
  const std::vector<double> importance = {0.5, 0.25};
  CheckpointWriter w(kind);
  w.add_array("heads/importance", importance.data(), {1, 2});
  w.set_string_attr("contents", "head analysis (headlab analyze)");
  w.set_string_attr("config", to_toml(config));
  w.commit(path);
}

}  // namespace

TEST_CASE("a heads file is refused by every training-checkpoint loader in one line", "[train][checkpoint]") {
  test::ScratchDir s("checkpointing_kind");
  const Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 100));
  const std::string path = (s.dir / "heads.h5").string();
  write_heads_file(path, c, FileKind::heads);
  const std::string line = path + ": a heads file (written by headlab analyze), not a checkpoint";
  CHECK_THROWS_WITH(checkpoint_config(path), line);
  CHECK_THROWS_WITH(open_checkpoint(path), line);
  Model<float> model(model_spec(c));
  CHECK_THROWS_WITH(load_training_checkpoint(path, model, nullptr), line);
  Parameters<float> params(parameter_specs(model_spec(c)));
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(c, params);
  CHECK_THROWS_WITH(continue_optimizer_state(path, *optimizer), line);

  // One written before file kinds (headlab_kind = "checkpoint") is a checkpoint, as it was then,
  // and is refused for what it lacks.
  test::set_root_string_attr(path, "headlab_kind", "checkpoint");
  CHECK_THROWS_WITH(open_checkpoint(path), path + ": missing model/tok_emb/weight (checkpoint of a different model?)");
}
