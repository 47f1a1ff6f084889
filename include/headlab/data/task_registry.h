// The tasks, one row each: the name data.task takes, how its dataset is made, and which model
// kind scores it. Code that depends on the task asks this table, so a new task is one row here
// (and its generator), not a string test in the config check, the setup and the CLI.
//   const TaskInfo& t = task_named(config.data.task);  // throws, naming the choices
//   if (t.family == TaskFamily::text) ...; if (t.scored_by != spec.kind) ...
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "headlab/data/tasks.h"
#include "headlab/nn/model_kinds.h"

namespace headlab {

enum class TaskFamily {
  text,       // TextDataset over data.path: prompts and samples are text
  generated,  // a SyntheticTask (data/tasks.h), drawn from data.seed
  parallel,   // a TranslationDataset (data/translation.h): sentence pairs
};

struct TaskInfo {
  const char* name;  // data.task
  TaskFamily family;
  ModelKind scored_by;  // the model kind whose loss fits the task's targets
  // generated: the constructor (src/data/<family>.cpp); null for text and parallel
  std::unique_ptr<SyntheticTask> (*make)(const TaskOptions& options);
  const char* why;  // why scored_by, for the error when the kind does not match
};

const std::vector<TaskInfo>& tasks();
const TaskInfo& task_named(const std::string& name);  // throws headlab::Error
const char* task_choices();                           // "text|k_relation|..."

}  // namespace headlab
