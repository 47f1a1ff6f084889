#include <catch2/catch.hpp>
#include <filesystem>

#include "headlab/io/checkpoint.h"
#include "headlab/tensor/arena.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/hdf5_edit.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

int64_t parameter_count(const ModelSpec& spec) {
  int64_t n = 0;
  for (const ParamSpec& p : parameter_specs(spec)) n += p.shape.numel();
  return n;
}

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
  CHECK_THROWS_WITH(open_checkpoint(path),
                    path + ": missing model/tok_emb/weight, which the model its config describes has");
}

TEST_CASE("a checkpoint whose config describes a huge model is refused before anything is allocated",
          "[train][checkpoint][faults]") {
  test::ScratchDir s("checkpointing_huge");
  const Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 100));
  Model<float> model(model_spec(c));
  // The tiny model's tensors under a config attribute that describes a billion parameters.
  Config huge = c;
  huge.model.d_model = 9216;
  huge.model.n_heads = 2;
  REQUIRE(parameter_count(model_spec(huge)) > 1'000'000'000);
  const std::string path = (s.dir / "huge.h5").string();
  save_training_checkpoint(path, huge, model, nullptr, RunProgress{}, nullptr);

  const int64_t allocations = tensor_system_allocations();
  const std::string line =
      path + ": model/tok_emb/weight has shape [256, 16], the model its config describes has [256, 9216]";
  CHECK_THROWS_WITH(checkpoint_config(path), line);
  CHECK_THROWS_WITH(open_checkpoint(path), line);
  CHECK(tensor_system_allocations() == allocations);

  // The same goes for a tensor the config's model has and the file does not, and the reverse.
  Config deeper = c;
  deeper.model.n_layers = 2;
  save_training_checkpoint(path, deeper, model, nullptr, RunProgress{}, nullptr);
  CHECK_THROWS_WITH(checkpoint_config(path),
                    path + ": missing model/blocks/1/ln1/weight, which the model its config describes has");
  const Model<float> deep_model(model_spec(deeper));
  save_training_checkpoint(path, c, deep_model, nullptr, RunProgress{}, nullptr);
  CHECK_THROWS_WITH(checkpoint_config(path),
                    path + ": model/blocks/1/attn/gates is not a tensor of the model its config describes");
}
