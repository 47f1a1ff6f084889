#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "headlab/common/error.h"
#include "headlab/data/model_input.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/tasks.h"
#include "headlab/nn/model_kinds.h"

using namespace headlab;

TEST_CASE("every task has one row: its family, the model kind that scores it, its constructor", "[data][tasks]") {
  std::set<std::string> names;
  std::string choices;
  for (const TaskInfo& t : tasks()) {
    INFO(t.name);
    CHECK(names.insert(t.name).second);
    CHECK((t.family == TaskFamily::generated) == (t.make != nullptr));
    CHECK(std::string(model_kind_info(t.scored_by).name).size() > 0);
    if (!choices.empty()) choices += '|';
    choices += t.name;
    if (t.family == TaskFamily::generated) {
      TaskOptions o;
      o.task = t.name;
      o.seq_len = 16;
      o.vocab_size = t.name == std::string("grammar") ? 0 : 16;
      o.offsets = {1};
      o.eval_examples = 8;
      CHECK(make_task(o)->vocab_size() > 0);
    }
  }
  CHECK(choices == task_choices());
  CHECK(&task_named("sort") == &tasks()[4]);
  std::string unknown = "unknown task 'sorting' (one of ";  // in steps: GCC 12 warns falsely on a + chain
  unknown += choices;
  unknown += ")";
  REQUIRE_THROWS_WITH(task_named("sorting"), unknown);
  TaskOptions text;
  text.task = "text";
  REQUIRE_THROWS_WITH(make_task(text), "data.task=text is not a generated task");
}

TEST_CASE("the model kinds' table answers what depends on the kind", "[nn]") {
  CHECK(std::string(model_kind_choices()) == "decoder|encoder|encoder_decoder");
  CHECK(model_kind_named("decoder").causal);
  CHECK(model_kind_named("decoder").lm_head);
  CHECK_FALSE(model_kind_named("encoder").causal);
  CHECK_FALSE(model_kind_named("encoder").lm_head);
  CHECK(model_kind_info(ModelKind::encoder).name == std::string("encoder"));
  // encoder_decoder's row is its decoder side: causal, an LM head over the target.
  CHECK(model_kind_named("encoder_decoder").causal);
  CHECK(model_kind_named("encoder_decoder").lm_head);
  CHECK(model_kind_named("encoder_decoder").source);
  REQUIRE_THROWS_WITH(model_kind_named("seq2seq"),
                      "unknown model kind 'seq2seq' (one of decoder|encoder|encoder_decoder)");
}

TEST_CASE("a task names the token that pads its rows when they carry no key_padding", "[data][tasks]") {
  const auto pad_of = [](const char* task, int64_t vocab) {
    TaskOptions o;
    o.task = task;
    o.seq_len = 16;
    o.vocab_size = vocab;
    o.min_len = task == std::string("grammar") || task == std::string("k_relation") ? 0 : 2;
    o.offsets = {1};
    o.eval_examples = 8;
    return make_task(o)->unkeyed_pad_token();
  };
  CHECK(pad_of("sort", 10) == 9);  // PAD = V-1 after a short list
  CHECK(pad_of("reverse", 10) == 9);
  CHECK(pad_of("grammar", 0) == 0);      // <pad>
  CHECK(pad_of("k_relation", 8) == -1);  // rows are full: token 0 is a real token
  CHECK(pad_of("classify", 16) == -1);   // padding is keyed (key_padding)
}

TEST_CASE("model_input reads a decoder's targets and an encoder's labels, for any rows", "[data]") {
  Batch b(3, 4, BatchLayout{.labels = true, .key_padding = true});
  for (int64_t i = 0; i < 12; ++i) b.tokens[i] = static_cast<int32_t>(i), b.targets[i] = static_cast<int32_t>(100 + i);
  for (int64_t r = 0; r < 3; ++r) b.labels[r] = static_cast<int32_t>(r);
  ModelSpec decoder, encoder;
  encoder.kind = ModelKind::encoder;
  const ModelInput all = model_input(decoder, b);
  CHECK(all.batch_size == 3);
  CHECK(all.targets == b.targets.data());
  const ModelInput last = model_input(encoder, b, 2, 1);
  CHECK(last.batch_size == 1);
  CHECK(last.tokens[0] == 8);
  CHECK(last.targets[0] == 2);
  CHECK(last.key_padding == b.key_padding.data() + 8);
  CHECK(&scored_targets(encoder, b) == &b.labels);
  REQUIRE_THROWS_WITH(model_input(decoder, b, 2, 2), "model_input: rows [2, 4) of a batch of 3");
}
