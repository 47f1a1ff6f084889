// Scores of every FFN hidden unit, for pruning units as heads are pruned (issue 32). Units are
// numbered block by block (spec.mlp_block() order: an encoder_decoder's encoder blocks, then its
// decoder's), each block's in order; unit f of block b is gated by Model::ffn_gates() table b.
//   importance   Michel et al.'s head importance carried to units: the mean over batches of
//                |dL/dg_f| at the model's gates, L a batch's mean loss (Michel et al.'s code
//                takes |grad| per batch as well; heads.csv's importance is per example);
//                importance_normalized divides by the l2 norm of the block's, as Michel et al.
//                do per layer, so blocks compare.
//   magnitude    |g_f| ||W_fc[f,:]|| ||W_proj[:,f]||: how strongly the unit can read and write
//                the residual stream, from the weights alone (the usual magnitude criterion for
//                neurons).
//   integrated_gradients  IG over the FFN gates from 0 (analysis/integrated_gradients.h,
//                GateKind::ffn_units), when ig_steps > 0; completeness is reported there.
// A unit whose gate is 0 scores 0 on all of them.
//   FfnUnitScores s = ffn_unit_scores(model, *dataset, Split::val, 8, 32, 20);
//   write_file_atomically(dir / "units.csv", units_csv(s));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/analysis/integrated_gradients.h"
#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct FfnUnitScores {
  std::vector<int64_t> block_units;       // units per MLP block
  std::vector<std::string> block_labels;  // "L0" in one stack; "enc.L0", "dec.L1" in an encoder_decoder
  std::vector<double> gate, importance, importance_normalized, magnitude;  // [units], block by block
  std::vector<double> integrated_gradients;                                // [units], or empty without ig_steps
  IntegratedGradients ig;  // its loss, baseline loss and completeness error
  double loss = 0;         // the mean loss over the scored targets
  int64_t batches = 0;
  int64_t n_units() const { return static_cast<int64_t>(gate.size()); }
};

template <typename T>
FfnUnitScores ffn_unit_scores(Model<T>& model, const Dataset& dataset, Split split, int64_t batches, int64_t batch_size,
                              int64_t ig_steps = 0);

// units.csv: block,label,unit,gate,importance,importance_normalized,magnitude[,integrated_gradients].
std::string units_csv(const FfnUnitScores& s);

}  // namespace headlab
