#include "headlab/data/model_input.h"

#include "headlab/common/error.h"

namespace headlab {

ModelInput model_input(const ModelSpec& spec, const Batch& batch, int64_t row, int64_t rows) {
  if (rows < 0) rows = batch.batch_size - row;
  HEADLAB_CHECK(row >= 0 && row + rows <= batch.batch_size,
                "model_input: rows [" << row << ", " << row + rows << ") of a batch of " << batch.batch_size);
  const int64_t T = batch.seq_len;
  ModelInput in;
  in.batch_size = rows;
  in.seq_len = T;
  in.tokens = batch.tokens.data() + row * T;
  in.targets = model_kind_info(spec.kind).lm_head ? batch.targets.data() + row * T : batch.labels.data() + row;
  in.key_padding = batch.key_padding.empty() ? nullptr : batch.key_padding.data() + row * T;
  if (model_kind_info(spec.kind).source) {
    HEADLAB_CHECK(batch.layout.source && batch.source_len > 0,
                  "model_input: a " << model_kind_info(spec.kind).name << " model needs a batch with a source side");
    const int64_t S = batch.source_len;
    in.source_len = S;
    in.source_tokens = batch.source_tokens.data() + row * S;
    in.source_padding = batch.source_padding.data() + row * S;
  }
  return in;
}

const std::vector<int32_t>& scored_targets(const ModelSpec& spec, const Batch& batch) {
  return model_kind_info(spec.kind).lm_head ? batch.targets : batch.labels;
}

}  // namespace headlab
