#include "headlab/data/task_registry.h"

#include "headlab/common/error.h"

namespace headlab {

const std::vector<TaskInfo>& tasks() {
  constexpr const char* kPerPosition = "it is scored per position by the LM head";
  static const std::vector<TaskInfo> all = {
      {"text", TaskFamily::text, ModelKind::decoder, nullptr, kPerPosition},
      {"k_relation", TaskFamily::generated, ModelKind::decoder, make_k_relation_task, kPerPosition},
      {"induction", TaskFamily::generated, ModelKind::decoder, make_induction_task, kPerPosition},
      {"reverse", TaskFamily::generated, ModelKind::decoder, make_algorithmic_task, kPerPosition},
      {"sort", TaskFamily::generated, ModelKind::decoder, make_algorithmic_task, kPerPosition},
      {"grammar", TaskFamily::generated, ModelKind::decoder, make_grammar_task, kPerPosition},
      {"classify", TaskFamily::generated, ModelKind::encoder, make_classify_task, "it predicts one label per sequence"},
      {"translate", TaskFamily::parallel, ModelKind::encoder_decoder, nullptr,
       "it reads a source sentence and scores the target sentence per position"},
  };
  return all;
}

const TaskInfo& task_named(const std::string& name) {
  for (const TaskInfo& t : tasks())
    if (name == t.name) return t;
  throw Error("unknown task '" + name + "' (one of " + task_choices() + ")");
}

const char* task_choices() {
  static const std::string choices = [] {
    std::string s;
    for (const TaskInfo& t : tasks()) {
      if (!s.empty()) s += '|';
      s += t.name;
    }
    return s;
  }();
  return choices.c_str();
}

}  // namespace headlab
