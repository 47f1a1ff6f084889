#include "headlab/analysis/head_detectors.h"

#include <array>
#include <cmath>
#include <limits>

#include "headlab/analysis/heads.h"
#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/hash.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kNames[kHeadDetectors] = {"previous_token", "duplicate_token", "induction", "prefix_matching"};
}  // namespace

const char* head_detector_name(HeadDetector detector) {
  return kNames[static_cast<int>(detector)];
}

DetectorInputs repeated_random_tokens(int64_t rows, int64_t half, int64_t vocab, uint64_t seed) {
  HEADLAB_CHECK(rows >= 1 && half >= 1 && vocab >= 1, "repeated_random_tokens: rows=" << rows << ", half=" << half
                                                                                      << ", vocab=" << vocab
                                                                                      << " must all be at least 1");
  DetectorInputs in;
  in.rows = rows;
  in.half = half;
  in.seed = seed;
  in.tokens.resize(static_cast<size_t>(rows * 2 * half));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < half; ++t) {
      const uint64_t draw =
          splitmix64(hash_combine(hash_combine(seed, static_cast<uint64_t>(r)), static_cast<uint64_t>(t)));
      const auto token = static_cast<int32_t>(draw % static_cast<uint64_t>(vocab));
      in.tokens[static_cast<size_t>(r * 2 * half + t)] = token;
      in.tokens[static_cast<size_t>(r * 2 * half + half + t)] = token;
    }
  return in;
}

std::vector<uint8_t> detection_pattern(HeadDetector detector, const int32_t* tokens, int64_t T) {
  std::vector<uint8_t> d(static_cast<size_t>(T * T), 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      bool on = false;
      switch (detector) {
        case HeadDetector::previous_token:
          on = j == i - 1;
          break;
        case HeadDetector::duplicate_token:
          on = j < i && tokens[j] == tokens[i];
          break;
        case HeadDetector::induction:  // the duplicate pattern shifted one key to the right
        case HeadDetector::prefix_matching:
          on = j >= 1 && tokens[j - 1] == tokens[i];
          break;
      }
      d[static_cast<size_t>(i * T + j)] = on ? 1 : 0;
    }
  return d;
}

double detector_score(HeadDetector detector, const double* probs, const std::vector<uint8_t>& pattern, int64_t T,
                      int64_t half) {
  HEADLAB_CHECK(pattern.size() == static_cast<size_t>(T * T),
                "detector_score: a pattern of " << pattern.size() << " cells for T = " << T);
  // TL's "mul": over every row; prefix matching: over the second copy's rows, each summing to 1
  // (a causal row always sees its own key), so the sum of A over them is their count.
  const int64_t first_row = detector == HeadDetector::prefix_matching ? half : 0;
  double matched = 0, total = 0;
  for (int64_t i = first_row; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const double a = probs[i * T + j];
      total += a;
      if (pattern[static_cast<size_t>(i * T + j)]) matched += a;
    }
  return total > 0 ? matched / total : kNaN;
}

std::string detector_model_problem(const ModelSpec& spec) {
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  if (kind.source)
    return std::string("a ") + kind.name +
           " model's decoder also attends to a source; the head detectors score a decoder's causal self-attention "
           "over one sequence (model.kind = decoder)";
  if (!kind.causal)
    return std::string("an ") + kind.name +
           " model has no causal self-attention (its heads see every position); the head detectors score a "
           "decoder's (model.kind = decoder)";
  return "";
}

template <typename T>
DetectorScores detect_heads(Model<T>& model, const DetectorInputs& inputs) {
  const ModelSpec& spec = model.spec();
  const std::string problem = detector_model_problem(spec);
  HEADLAB_CHECK(problem.empty(), problem);
  const int64_t T_ = inputs.seq_len();
  HEADLAB_CHECK(T_ >= 2 && T_ <= spec.max_seq_len, "head detectors: sequences of 2 x "
                                                       << inputs.half << " tokens; the model takes 2 to "
                                                       << spec.max_seq_len);
  DetectorScores s;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (const AttentionSite& site : sites)
    for (int64_t h = 0; h < spec.heads_at_site(site); ++h) {
      s.labels.push_back(head_label(site, h, true));
      s.layer.push_back(site.layer);
      s.head.push_back(h);
    }
  for (auto& column : s.scores) column.assign(s.labels.size(), 0.0);

  for (int64_t r = 0; r < inputs.rows; ++r) {
    const int32_t* row = inputs.tokens.data() + r * T_;
    const AttentionExample a = attention_on_tokens(model, std::vector<int32_t>(row, row + T_));
    std::array<std::vector<uint8_t>, kHeadDetectors> patterns;
    for (int d = 0; d < kHeadDetectors; ++d)
      patterns[static_cast<size_t>(d)] = detection_pattern(static_cast<HeadDetector>(d), row, T_);
    size_t k = 0;
    for (int64_t l = 0; l < a.n_layers; ++l)
      for (int64_t h = 0; h < a.layer_heads[static_cast<size_t>(l)]; ++h, ++k) {
        const double* probs = a.probs.data() + (l * a.n_heads + h) * T_ * T_;
        for (int d = 0; d < kHeadDetectors; ++d)
          s.scores[static_cast<size_t>(d)][k] +=
              detector_score(static_cast<HeadDetector>(d), probs, patterns[static_cast<size_t>(d)], T_, inputs.half) /
              inputs.rows;
      }
  }
  return s;
}

void write_detectors_csv(const std::string& path, const DetectorCurves& curves) {
  std::vector<std::string> header = {"step", "label", "layer", "head"};
  for (const char* name : kNames) header.push_back(name);
  CsvWriter csv(header);
  for (size_t c = 0; c < curves.steps.size(); ++c) {
    const DetectorScores& s = curves.scores[c];
    for (size_t k = 0; k < s.labels.size(); ++k) {
      std::vector<std::string> fields = {std::to_string(curves.steps[c]), s.labels[k], std::to_string(s.layer[k]),
                                         std::to_string(s.head[k])};
      for (const auto& column : s.scores) fields.push_back(csv_number("%.6g", column[k]));
      csv.row(fields);
    }
  }
  write_file_atomically(path, csv.text());
}

void write_detectors_h5(const std::string& path, const DetectorCurves& curves) {
  HEADLAB_CHECK(!curves.scores.empty(), "circuits: no checkpoint was scored, nothing to write to " << path);
  const DetectorScores& first = curves.scores.front();
  const auto C = static_cast<int64_t>(curves.steps.size()), N = static_cast<int64_t>(first.labels.size());
  CheckpointWriter w(FileKind::circuits);
  w.add_array("step", curves.steps);
  for (int d = 0; d < kHeadDetectors; ++d) {
    std::vector<double> values;
    for (const DetectorScores& s : curves.scores) {
      HEADLAB_CHECK(static_cast<int64_t>(s.labels.size()) == N,
                    "circuits: checkpoints of one run with different heads");
      values.insert(values.end(), s.scores[static_cast<size_t>(d)].begin(), s.scores[static_cast<size_t>(d)].end());
    }
    w.add_array(std::string("scores/") + kNames[d], values.data(), {C, N});
  }
  w.add_array("layer", first.layer);
  w.add_array("head", first.head);
  std::vector<int64_t> tokens(curves.inputs.tokens.begin(), curves.inputs.tokens.end());
  w.add_array("tokens", tokens.data(), {curves.inputs.rows, curves.inputs.seq_len()});
  std::string labels;
  for (const std::string& label : first.labels) labels += (labels.empty() ? "" : ",") + label;
  w.set_string_attr("contents", "head detector scores (headlab circuits --detectors)");
  w.set_string_attr("labels", labels);
  w.set_string_attr("run", curves.run);
  w.set_int_attr("rows", curves.inputs.rows);
  w.set_int_attr("half", curves.inputs.half);
  w.set_int_attr("seed", static_cast<int64_t>(curves.inputs.seed));
  w.commit(path);
}

template DetectorScores detect_heads<float>(Model<float>&, const DetectorInputs&);
template DetectorScores detect_heads<double>(Model<double>&, const DetectorInputs&);

}  // namespace headlab
