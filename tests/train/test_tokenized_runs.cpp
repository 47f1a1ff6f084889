#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "headlab/data/text.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/setup.h"
#include "headlab/train/trainer.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// Seeded verses of a few dozen words: a corpus a small sentencepiece vocabulary covers.
std::string verses(int n, uint64_t seed) {
  static const char* words[] = {"And",  "God",   "said",  "let",    "there",  "be",   "light", "and",
                                "was",  "the",   "earth", "waters", "heaven", "upon", "face",  "of",
                                "deep", "unto",  "him",   "them",   "his",    "Lord", "shall", "thou",
                                "that", "which", "came",  "to",     "pass",   "in",   "days"};
  std::mt19937_64 rng(seed);
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int length = 5 + static_cast<int>(rng() % 10);
    for (int w = 0; w < length; ++w) text += std::string(w ? " " : "") + words[rng() % std::size(words)];
    text += ".\n";
  }
  return text;
}

Config sentencepiece_config(const test::ScratchDir& s) {
  Config c = test::tiny_text_config(s.write("verses.txt", verses(400, 1)));
  c.data.tokenizer = "sentencepiece";
  c.data.vocab_size = 60;
  c.model.vocab_size = 64;  // 4 ids no text has
  return c;
}

RunOptions quiet_run(const fs::path& dir, const std::string& resume = "") {
  RunOptions o;
  o.out_dir = dir.string();
  o.resume = resume;
  o.quiet = true;
  return o;
}

EvalStats evaluate_checkpoint(const std::string& path, const std::vector<std::string>& overrides = {}) {
  OpenedCheckpoint c = open_checkpoint(path, overrides);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = c.dataset->make_batch(c.config.train.batch_size);
  return evaluate(*c.model, *c.dataset, Split::val, c.config.train.eval_batches, batch, tape);
}

}  // namespace

TEST_CASE("a sentencepiece text run stores its tokenizer, and its checkpoints evaluate with it", "[train][tokenizer]") {
  test::ScratchDir s("tokenized_run");
  const Config c = sentencepiece_config(s);
  const RunResult r = run_training(c, quiet_run(s.dir / "run"));
  REQUIRE(r.val_loss);
  const std::string last = checkpoint_path((s.dir / "run").string(), c.train.steps);
  const std::shared_ptr<const Tokenizer> stored = checkpoint_tokenizer(last, c);
  REQUIRE(std::string(stored->kind()) == "sentencepiece");
  CHECK(stored->vocab_size() == 60);
  CHECK(test::read_file(s.dir / "run" / "tokenizer.model") == stored->serialized());
  CHECK(stored->serialized() == make_dataset(c)->tokenizer()->serialized());

  // The checkpoint's tokenizer is used, not one trained anew: asking for a BPE model changes nothing.
  const EvalStats e = evaluate_checkpoint(last), bpe = evaluate_checkpoint(last, {"data.tokenizer_model=bpe"});
  CHECK(e.loss == *r.val_loss);
  CHECK(bpe.loss == e.loss);
  CHECK(e.bits_per_byte > 0);
  CHECK_THROWS_WITH(evaluate_checkpoint(last, {"data.tokenizer=bytes"}),
                    Catch::Contains(last + ": stores a sentencepiece tokenizer, but data.tokenizer = bytes"));

  // A resumed run keeps the tokenizer its checkpoints hold, whatever the config now asks for.
  Config bpe_config = c;
  bpe_config.data.tokenizer_model = "bpe";
  bpe_config.train.steps = 6;
  CHECK(run_training(bpe_config, quiet_run(s.dir / "run", "auto")).end == RunEnd::finished);
  CHECK(checkpoint_tokenizer(checkpoint_path((s.dir / "run").string(), 6), c)->serialized() == stored->serialized());
  CHECK(test::read_file(s.dir / "run" / "tokenizer.model") == stored->serialized());
}

TEST_CASE("a checkpoint's tokenizer must fit the model and match data.tokenizer", "[train][tokenizer]") {
  test::ScratchDir s("tokenizer_checks");
  Config c = sentencepiece_config(s);
  const fs::path path = s.dir / "ckpt.h5";
  Model<float> model(model_spec(c));
  const auto too_big = make_tokenizer({.kind = "sentencepiece", .vocab_size = 80}, {verses(400, 2)});
  save_training_checkpoint(path.string(), c, model, nullptr, RunProgress{}, too_big.get());
  CHECK_THROWS_WITH(open_checkpoint(path.string()),
                    Catch::Contains(path.string() + ": its sentencepiece tokenizer has 80 tokens, more than "
                                                    "model.vocab_size = 64"));
  // Written without a tokenizer (as every checkpoint before them): bytes, which this config is not.
  save_training_checkpoint(path.string(), c, model, nullptr, RunProgress{}, nullptr);
  CHECK_THROWS_WITH(open_checkpoint(path.string()), Catch::Contains("stores no tokenizer"));
  c.data.tokenizer = "bytes";
  c.model.vocab_size = 256;
  Model<float> byte_model(model_spec(c));
  save_training_checkpoint(path.string(), c, byte_model, nullptr, RunProgress{}, nullptr);
  CHECK(std::string(open_checkpoint(path.string()).dataset->tokenizer()->kind()) == "bytes");
}

TEST_CASE("bits per byte with sentencepiece is the split's nats over its bytes", "[train][tokenizer]") {
  test::ScratchDir s("tokenizer_bpb");
  const Config c = sentencepiece_config(s);
  const std::unique_ptr<Dataset> dataset = make_dataset(c);
  const auto& text = dynamic_cast<const TextDataset&>(*dataset);
  // The val block's tokens, counted by encoding its bytes directly.
  const ByteRange bytes = text.split_bytes(Split::val);
  const std::string corpus = test::read_file(c.data.path);
  std::vector<int32_t> ids;
  text.tokenizer()->encode(std::string_view(corpus).substr(bytes.begin, bytes.size()), ids);
  REQUIRE(text.split_range(Split::val).size() == static_cast<int64_t>(ids.size()));
  CHECK(text.bytes_per_token(Split::val) == static_cast<double>(bytes.size()) / static_cast<double>(ids.size()));
  REQUIRE(text.bytes_per_token(Split::val) > 1.5);  // subwords: several bytes each

  // All-zero weights give uniform logits: every target costs ln V nats, V = model.vocab_size, so
  // the split's tokens cost tokens * ln V nats, and its bits per byte are that / ln 2 / bytes.
  Model<float> model(model_spec(c));
  std::fill_n(model.params().values(), model.params().slab_size(), 0.0f);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(4);
  const EvalStats e = evaluate(model, *dataset, Split::val, 0, batch, tape);
  const double V = static_cast<double>(c.model.vocab_size);
  CHECK(e.loss == Approx(std::log(V)).epsilon(1e-6));
  CHECK(e.bits_per_byte ==
        Approx(static_cast<double>(ids.size()) * std::log(V) / std::log(2.0) / static_cast<double>(bytes.size()))
            .epsilon(1e-6));
}
