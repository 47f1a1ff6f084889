// Sequence classification for the encoder: is the second segment consistent with the first?
// (a small stand-in for the entailment decisions of Michel et al.'s MNLI experiments).
// Vocabulary V = data.vocab_size: items 0 .. V-4, CLS = V-3, SEP = V-2, PAD = V-1. A row is
//   CLS a_1 .. a_n SEP b_1 .. b_n PAD ...     n uniform in [min_len, max_len], 2n + 2 <= T
// where a holds n distinct items and
//   label 1 (consistent):   b is a random permutation of a
//   label 0 (inconsistent): the same, then one random b_j replaced by an item not in a
// so label = 1 iff every b_j occurs in a. Labels alternate with the example id (exactly half of
// each val/test set, and of each training batch of even size, is 1). key_padding marks the
// 2n + 2 real tokens; targets are all -1 (the encoder reads labels). gold_antecedent of b_j is
// the position of the same item in a (-1 for the replaced one): the alignment a matching head
// should find.
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"

namespace headlab {

namespace {

constexpr int64_t kDefaultVocab = 16;

class ClassifyTask : public SyntheticTask {
 public:
  explicit ClassifyTask(const TaskOptions& o)
      : SyntheticTask(o), vocab_(o.vocab_size ? o.vocab_size : kDefaultVocab), items_(vocab_ - 3) {
    HEADLAB_CHECK(o.n_classes == 2, "classify: the task has 2 classes but model.n_classes=" << o.n_classes);
    max_len_ = o.max_len ? o.max_len : (seq_len_ - 2) / 2;
    min_len_ = o.min_len ? o.min_len : max_len_;
    HEADLAB_CHECK(max_len_ >= 1 && 2 * max_len_ + 2 <= seq_len_,
                  "classify: data.max_len=" << max_len_ << " needs 2*max_len + 2 <= data.seq_len=" << seq_len_
                                            << " (CLS, two segments, SEP)");
    HEADLAB_CHECK(min_len_ >= 1 && min_len_ <= max_len_,
                  "classify: data.min_len=" << min_len_ << " must be in [1, max_len=" << max_len_ << "]");
    HEADLAB_CHECK(items_ >= max_len_ + 1, "classify: data.vocab_size=" << vocab_ << " gives " << items_
                                                                       << " items; segments of " << max_len_
                                                                       << " distinct items need at least "
                                                                       << max_len_ + 4 << " (one item spare)");
  }

  std::string name() const override {
    std::ostringstream s;
    s << "classify(len=" << min_len_ << ".." << max_len_ << ",vocab=" << vocab_ << ")";
    return s.str();
  }
  int64_t vocab_size() const override { return vocab_; }
  BatchLayout batch_layout() const override {
    BatchLayout layout;
    layout.labels = true;
    layout.key_padding = true;
    layout.gold_antecedent = true;
    return layout;
  }
  std::string token_label(int32_t token) const override {
    if (token == vocab_ - 3) return "CLS";
    if (token == vocab_ - 2) return "SEP";
    if (token == vocab_ - 1) return "PAD";
    return std::to_string(token);
  }

 protected:
  int32_t pad_token() const override { return static_cast<int32_t>(vocab_ - 1); }

  void generate(RowRng& rng, int64_t example_id, const ExampleView& row) const override {
    const int64_t n = min_len_ + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_len_ - min_len_ + 1)));
    int32_t* x = row.tokens;
    const int32_t cls = static_cast<int32_t>(vocab_ - 3), sep = static_cast<int32_t>(vocab_ - 2);
    int32_t* a = x + 1;
    int32_t* b = x + n + 2;
    x[0] = cls;
    for (int64_t i = 0; i < n; ++i) a[i] = draw_item(rng, a, i);
    x[n + 1] = sep;
    for (int64_t i = 0; i < n; ++i) b[i] = a[i];
    for (int64_t i = n - 1; i > 0; --i) std::swap(b[i], b[rng.below(static_cast<uint64_t>(i + 1))]);
    const bool consistent = example_id % 2 == 1;  // by id, so redraws keep the classes balanced
    if (!consistent) b[rng.below(static_cast<uint64_t>(n))] = draw_item(rng, a, n);
    *row.label = consistent ? 1 : 0;
    for (int64_t t = 0; t < 2 * n + 2; ++t) row.key_padding[t] = 1;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i)
        if (a[i] == b[j]) row.gold_antecedent[n + 2 + j] = static_cast<int32_t>(1 + i);
  }

 private:
  // An item not among a[0..count), by rejection (count < items_, so one exists).
  int32_t draw_item(RowRng& rng, const int32_t* a, int64_t count) const {
    for (;;) {
      const int32_t item = static_cast<int32_t>(rng.below(static_cast<uint64_t>(items_)));
      bool taken = false;
      for (int64_t i = 0; i < count && !taken; ++i) taken = a[i] == item;
      if (!taken) return item;
    }
  }

  int64_t vocab_, items_;
  int64_t min_len_ = 0, max_len_ = 0;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_classify_task(const TaskOptions& options) {
  return std::make_unique<ClassifyTask>(options);
}

}  // namespace headlab
