// Head detectors: how much of a head's attention falls where a previous-token, duplicate-token,
// induction or prefix-matching head would put it, on sequences of repeated random tokens, for one
// checkpoint or every checkpoint of a run (the induction phase change, Olsson et al. 2022).
// docs/circuits.md defines each score; in short, for a head's pattern A [T,T] (rows sum to 1) on
// tokens x[0..T):
//   previous_token, duplicate_token, induction: TransformerLens's head_detector with its defaults
//     (error_measure "mul", BOS and current token not excluded): sum(A o D) / sum(A), D the 0/1
//     detection pattern (D[i][i-1]; D[i][j] = x[j] == x[i], j < i; D[i][j] = x[j-1] == x[i],
//     1 <= j <= i), averaged over the sequences (what detect_head does with a list of them);
//   prefix_matching: Olsson et al.'s, on the same sequences, each n random tokens twice: the mean
//     over the second copy's queries (i >= n) of the attention on tokens whose predecessor is the
//     query's token (the token after its earlier copy): the induction pattern's rows i >= n only.
// On these sequences the induction score is about (n / 2n) x prefix_matching, since TL's average
// also counts the first copy's rows, which have (almost) nothing to match.
//   DetectorInputs in = repeated_random_tokens(32, 16, spec.vocab_size, 0);
//   DetectorScores s = detect_heads(model, in);   // s.scores[detector][k], k = HeadScores order
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

enum class HeadDetector { previous_token, duplicate_token, induction, prefix_matching };
inline constexpr int kHeadDetectors = 4;
const char* head_detector_name(HeadDetector detector);  // "previous_token", ... (the CSV columns)

// Sequences of `rows` x 2n tokens: n tokens drawn uniformly from [0, vocab) (splitmix64 of seed,
// row and position), then the same n again.
struct DetectorInputs {
  int64_t rows = 0, half = 0;
  uint64_t seed = 0;
  std::vector<int32_t> tokens;  // [rows, 2 * half]
  int64_t seq_len() const { return 2 * half; }
};
DetectorInputs repeated_random_tokens(int64_t rows, int64_t half, int64_t vocab, uint64_t seed);

// TransformerLens's detection pattern D [T,T] (row-major, 0/1, lower triangular) of
// previous_token, duplicate_token or induction on `tokens`; prefix_matching uses induction's.
std::vector<uint8_t> detection_pattern(HeadDetector detector, const int32_t* tokens, int64_t T);

// One head's score on one sequence: A [T,T] its attention, `pattern` the sequence's
// detection_pattern for `detector` (built once per sequence, shared by every head); `half` the first
// copy's length (read by prefix_matching only). NaN when nothing is counted (sum(A) = 0, or no
// second copy).
double detector_score(HeadDetector detector, const double* probs, const std::vector<uint8_t>& pattern, int64_t T,
                      int64_t half);

// Every head's four scores on `inputs`, averaged over its rows. Heads in HeadScores order (site by
// site, head by head); only a decoder's causal self-attention is scored: any other kind of model
// is one headlab::Error line ("... has no causal self-attention over one sequence").
struct DetectorScores {
  std::vector<std::string> labels;  // head_label: "L1H0"
  std::vector<int64_t> layer, head;
  std::array<std::vector<double>, kHeadDetectors> scores;  // [detector][head]
};
template <typename T>
DetectorScores detect_heads(Model<T>& model, const DetectorInputs& inputs);

// The scores of several checkpoints of one run (the same heads, the same inputs), in step order:
// what `headlab circuits RUN --detectors` writes, into
//   detectors.csv  step,label,layer,head,previous_token,duplicate_token,induction,prefix_matching
//                  (one row per checkpoint and head, %.6g);
//   detectors.h5   FileKind::circuits: step [C], scores/<detector> [C, N] (float64), layer, head
//                  [N], tokens [rows, 2 half] (the inputs); attributes contents, labels (comma-
//                  separated), rows, half, seed, run.
struct DetectorCurves {
  DetectorInputs inputs;
  std::string run;  // the run folder or checkpoint scored
  std::vector<int64_t> steps;
  std::vector<DetectorScores> scores;  // one per step
};
void write_detectors_csv(const std::string& path, const DetectorCurves& curves);
void write_detectors_h5(const std::string& path, const DetectorCurves& curves);

// Why `spec` has no heads to detect (an encoder, an encoder_decoder), or "" for a decoder.
std::string detector_model_problem(const ModelSpec& spec);

}  // namespace headlab
