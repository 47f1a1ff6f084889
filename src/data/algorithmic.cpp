// Reverse and sort (selection and aggregation in the spirit of RASP, Weiss et al. 2021).
// Vocabulary V = data.vocab_size: items 0 .. V-3, SEP = V-2, PAD = V-1. A row holds
//   positions 0 .. n-1: items a_1 .. a_n   (n uniform in [min_len, max_len], items uniform)
//   position  n:        SEP
//   positions n+1 ..:   y_1 .. y_n          reverse: y_i = a_(n+1-i); sort: y = a ascending
//   then PAD to T (y_n sits at position 2n, which is past the row when 2n = T).
// Only the output is scored: target[n - 1 + i] = y_i for i = 1..n (the position holding SEP
// predicts y_1, the one holding y_i predicts y_(i+1)); every other target is -1. 2n <= T.
#include <algorithm>
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"

namespace headlab {

namespace {

constexpr int64_t kDefaultVocab = 16;

class AlgorithmicTask : public SyntheticTask {
 public:
  explicit AlgorithmicTask(const TaskOptions& o)
      : SyntheticTask(o), sort_(o.task == "sort"), vocab_(o.vocab_size ? o.vocab_size : kDefaultVocab) {
    const char* task = sort_ ? "sort" : "reverse";
    HEADLAB_CHECK(vocab_ >= 3, task << ": data.vocab_size=" << vocab_ << " leaves no items (items are 0..V-3; "
                                    << "V-2 is the separator, V-1 padding)");
    max_len_ = o.max_len ? o.max_len : seq_len_ / 2;
    min_len_ = o.min_len ? o.min_len : max_len_;
    HEADLAB_CHECK(max_len_ >= 1 && 2 * max_len_ <= seq_len_,
                  task << ": data.max_len=" << max_len_ << " items need 2*max_len <= data.seq_len=" << seq_len_
                       << " (items, separator, output)");
    HEADLAB_CHECK(min_len_ >= 1 && min_len_ <= max_len_,
                  task << ": data.min_len=" << min_len_ << " must be in [1, max_len=" << max_len_ << "]");
  }

  std::string name() const override {
    std::ostringstream s;
    s << (sort_ ? "sort" : "reverse") << "(len=" << min_len_ << ".." << max_len_ << ",vocab=" << vocab_ << ")";
    return s.str();
  }
  int64_t vocab_size() const override { return vocab_; }
  int32_t unkeyed_pad_token() const override { return pad_token(); }  // shorter lists leave PAD at the end

 protected:
  int32_t pad_token() const override { return static_cast<int32_t>(vocab_ - 1); }

  void generate(RowRng& rng, int64_t, const ExampleView& row) const override {
    const int64_t T = row.seq_len;
    const int64_t n = min_len_ + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_len_ - min_len_ + 1)));
    int32_t* x = row.tokens;
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_ - 2)));
    x[n] = static_cast<int32_t>(vocab_ - 2);
    // y_i is the target at position n-1+i (SEP predicts y_1) and the token at position n+i.
    int32_t* y = row.targets + n - 1;
    for (int64_t i = 1; i <= n; ++i) y[i] = x[sort_ ? i - 1 : n - i];
    if (sort_) std::sort(y + 1, y + n + 1);
    for (int64_t i = 1; i <= n && n + i < T; ++i) x[n + i] = y[i];
  }

 private:
  bool sort_;
  int64_t vocab_, min_len_ = 0, max_len_ = 0;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_algorithmic_task(const TaskOptions& options) {
  return std::make_unique<AlgorithmicTask>(options);
}

}  // namespace headlab
