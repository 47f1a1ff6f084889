#include "headlab/train/distillation.h"

#include <algorithm>

#include "headlab/common/error.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"

namespace headlab {

std::unique_ptr<Model<float>> load_teacher(const std::string& path, const ModelSpec& student,
                                           const Tokenizer* student_tokenizer) {
  const Config config = checkpoint_config(path);
  const ModelSpec spec = model_spec(config);
  const ModelKindInfo &kind = model_kind_info(spec.kind), &student_kind = model_kind_info(student.kind);
  HEADLAB_CHECK(spec.kind == student.kind, "train.teacher = " << path << ": a " << kind.name
                                                              << " model; distillation needs the student's kind, "
                                                              << student_kind.name);
  HEADLAB_CHECK(kind.lm_head ? spec.vocab_size == student.vocab_size : spec.n_classes == student.n_classes,
                "train.teacher = " << path << ": "
                                   << (kind.lm_head ? concat("model.vocab_size = ", spec.vocab_size)
                                                    : concat("model.n_classes = ", spec.n_classes))
                                   << ", the student's is " << (kind.lm_head ? student.vocab_size : student.n_classes)
                                   << "; its outputs must mean the student's");
  const std::shared_ptr<const Tokenizer> tokenizer = checkpoint_tokenizer(path, config);
  HEADLAB_CHECK((tokenizer == nullptr) == (student_tokenizer == nullptr) &&
                    (tokenizer == nullptr || tokenizer->serialized() == student_tokenizer->serialized()),
                "train.teacher = " << path << ": its tokenizer is not the student's; its token ids would mean other "
                                   << "tokens");
  auto teacher = std::make_unique<Model<float>>(spec);
  load_training_checkpoint(path, *teacher, nullptr);
  return teacher;
}

std::unique_ptr<Model<float>> copy_of(const Model<float>& model) {
  auto copy = std::make_unique<Model<float>>(model.spec());
  for (const auto& [to, from] : {std::pair{&copy->params(), &model.params()}, std::pair{&copy->gates(), &model.gates()},
                                 std::pair{&copy->ffn_gates(), &model.ffn_gates()}})
    std::copy(from->values(), from->values() + from->slab_size(), to->values());
  return copy;
}

}  // namespace headlab
