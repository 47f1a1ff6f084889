// Alignment heads (issue 28 item 4): every cross-attention head of a translation model, and each
// layer's mean over its heads, scored as a word aligner against the Strong's gold alignment of a
// held-out split, beside two baselines: the diagonal and IBM Model 1 trained on the training
// split's words (analysis/word_alignment.h has the definitions).
// A head's alignment of one verse: the model reads the source and, teacher-forced, the reference
// target; the cross-attention row of the query that predicts a target token is that token's
// attention (Garg et al. 2019), merged to words (attention_alignment). Verses whose tokens do not
// decode back to the text's words (truncated to the source/target cap) are skipped and counted.
// A head is an alignment head when its AER is below both baselines'.
//   AlignmentReport r = score_alignment_heads(model, data, Split::test, {});
//   write_alignment_csv("run/alignment.csv", r);
//   add_alignment_columns(r, scores);  // heads.csv's alignment_aer, _precision, _recall
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/analysis/word_alignment.h"
#include "headlab/data/translation.h"
#include "headlab/nn/model.h"

namespace headlab {

struct AlignmentOptions {
  int ibm_iterations = 5;
  int64_t ibm_training_sentences = 0;  // IBM Model 1 on the first N training verses; 0 = all
  int64_t max_sentences = 0;           // the split's first N verses; 0 = all
};

struct AlignmentRow {
  std::string method;  // "cross.L1H2", "cross.L1 mean", "diagonal", "ibm1"
  int64_t layer = -1;  // -1 for the baselines
  int64_t head = -1;   // -1 for a layer's mean and the baselines
  AlignmentCounts counts;
  bool alignment_head = false;  // AER below both baselines'
};

struct AlignmentReport {
  std::vector<AlignmentRow> rows;  // heads layer by layer, each layer's mean after its heads, then baselines
  int64_t sentences = 0, skipped = 0;
  std::vector<double> ibm_log_likelihoods;
};

// Throws headlab::Error (one line) when the model is not an encoder_decoder or the split's
// verses carry no Strong's tags (two plain files).
AlignmentReport score_alignment_heads(Model<float>& model, const TranslationDataset& data, Split split,
                                      const AlignmentOptions& options);

// Each cross head's AER, precision and recall into heads.csv's alignment_* columns (the way
// add_bleu_columns adds BLEU's); throws headlab::Error when a head is not in the scores.
void add_alignment_columns(const AlignmentReport& report, HeadScores& scores);

// method,layer,head,predicted,gold,correct,precision,recall,aer,alignment_head
void write_alignment_csv(const std::string& path, const AlignmentReport& report);

}  // namespace headlab
