// Sentence pairs for translation: loading (the Bible's verse pairs or two line-aligned files),
// the joint tokenizer, length caps, and the token-budget batches. See
// include/headlab/data/translation.h and datasets/README.md "Translation".
#include "headlab/data/translation.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/hash.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWho = "translate";

// The lines of `text`: split at '\n', a '\r' before it dropped; no line after a final '\n'.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return lines;
}

void check_utf8_line(std::string_view line, const std::string& name, size_t index) {
  const size_t nul = line.find('\0');
  HEADLAB_CHECK(nul == std::string_view::npos,
                kWho << ": " << name << ":" << index + 1 << " holds a NUL byte at column " << nul + 1);
  const int64_t bad = first_invalid_utf8(line);
  if (bad < 0) return;
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<uint8_t>(line[static_cast<size_t>(bad)]));
  HEADLAB_CHECK(false, kWho << ": " << name << ":" << index + 1 << " is not UTF-8 text (byte " << hex << " at column "
                            << bad + 1 << ")");
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\v\f") == std::string_view::npos;
}

// A seeded bijection of [0, n): a 4-round Feistel network on the smallest domain of 2^(2h) >= n
// values, cycle-walked back into [0, n). It orders an epoch's batches from (seed, epoch) alone,
// without a stored permutation, so filling a batch neither allocates nor keeps state.
int64_t permuted(int64_t i, int64_t n, uint64_t key) {
  int half = 1;
  while ((int64_t{1} << (2 * half)) < n) ++half;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  auto x = static_cast<uint64_t>(i);
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round)
      left = std::exchange(right, left ^ (hash_combine(key, (round << 32) | right) & mask));
    x = (left << half) | right;
  } while (x >= static_cast<uint64_t>(n));
  return static_cast<int64_t>(x);
}

std::string bible_name(const BiblePairsOptions& b) {
  return concat("bible-", b.source_module, "-", b.target_module);
}

}  // namespace

ParallelLines parse_parallel_lines(std::string_view source, std::string_view target, const std::string& source_name,
                                   const std::string& target_name) {
  const std::vector<std::string_view> s = split_lines(source), t = split_lines(target);
  HEADLAB_CHECK(s.size() == t.size(), kWho << ": " << source_name << " has " << s.size() << " lines but " << target_name
                                           << " has " << t.size()
                                           << " (data.path and data.target_path must be line-aligned)");
  ParallelLines out;
  out.lines = static_cast<int64_t>(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    check_utf8_line(s[i], source_name, i);
    check_utf8_line(t[i], target_name, i);
    if (blank(s[i]) || blank(t[i])) {
      ++out.empty_pairs;
      continue;
    }
    out.pairs.push_back({static_cast<int64_t>(i) + 1, std::string(s[i]), std::string(t[i])});
  }
  return out;
}

ParallelLines read_parallel_files(const std::string& source_path, const std::string& target_path) {
  for (const std::string& path : {source_path, target_path}) {
    std::error_code ec;
    HEADLAB_CHECK(fs::exists(path, ec),
                  kWho << ": no such file: " << path << (path == source_path ? " (data.path)" : " (data.target_path)"));
  }
  return parse_parallel_lines(read_text_file(source_path, "translation source"),
                              read_text_file(target_path, "translation target"), source_path, target_path);
}

TranslationDataset::TranslationDataset(const TranslationOptions& options)
    : path_(options.path),
      seq_len_(options.seq_len),
      source_len_(options.max_source_tokens()),
      batch_tokens_(options.batch_tokens),
      seed_(options.seed),
      tokenizer_(options.stored_tokenizer) {
  HEADLAB_CHECK(seq_len_ >= 2 && source_len_ >= 2, kWho << ": data.seq_len=" << seq_len_ << " and data.source_len="
                                                        << source_len_ << " must be at least 2 (one token and </s>)");
  HEADLAB_CHECK(batch_tokens_ >= std::max(seq_len_, source_len_),
                kWho << ": data.batch_tokens=" << batch_tokens_ << " cannot hold one row of the longest pair allowed"
                     << " (data.seq_len=" << seq_len_ << ", data.source_len=" << source_len_ << ")");
  load_pairs(options);
  if (!tokenizer_) {
    std::vector<std::string> text;
    for (const TranslationSentence& s : splits_[index(Split::train)].sentences) {
      text.push_back(s.pair.source);
      text.push_back(s.pair.target);
    }
    tokenizer_ = make_tokenizer(options.tokenizer, text);
  }
  specials_ = tokenizer_->specials();
  HEADLAB_CHECK(
      specials_.pad >= 0 && specials_.bos >= 0 && specials_.eos >= 0,
      kWho << ": the " << tokenizer_->kind() << " tokenizer has no <pad>, <s> and </s> (bytes needs specials)");
  tokenize_and_cut(options);
}

// The pairs of each split, in corpus order; no val/test source equal to a training source.
void TranslationDataset::load_pairs(const TranslationOptions& options) {
  auto add = [this](Split split, BiblePair pair, int64_t line) {
    TranslationSentence s;
    s.pair = std::move(pair);
    s.line = line;
    splits_[index(split)].sentences.push_back(std::move(s));
  };
  if (options.path == kBibleAlias) {
    HEADLAB_CHECK(options.target_path.empty(),
                  kWho << ": data.target_path=" << options.target_path
                       << " is for a source file in data.path; data.path=bible reads the Bible's modules");
    const BiblePairsExport corpus = ensure_bible_pairs(options.bible);
    for (Split split : {Split::train, Split::val, Split::test})
      for (BiblePair& pair : read_bible_pairs(corpus.split_path(split))) add(split, std::move(pair), 0);
    counts_.empty_pairs = corpus.counts.empty_pairs;
    counts_.duplicates_dropped = corpus.counts.duplicates_dropped;
    name_ = concat(kWho, ":", bible_name(options.bible));
  } else {
    HEADLAB_CHECK(!options.target_path.empty(),
                  kWho << ": data.path=" << options.path << " is a source file and needs data.target_path");
    ParallelLines lines = read_parallel_files(options.path, options.target_path);
    counts_.empty_pairs = lines.empty_pairs;
    const auto n = static_cast<int64_t>(lines.pairs.size());
    const auto n_train = static_cast<int64_t>(static_cast<double>(n) * options.train_fraction);
    const auto n_val = static_cast<int64_t>(static_cast<double>(n) * options.val_fraction);
    std::unordered_set<std::string> train_sources;
    for (int64_t i = 0; i < n; ++i) {
      ParallelLines::Pair& p = lines.pairs[static_cast<size_t>(i)];
      const Split split = i < n_train ? Split::train : i < n_train + n_val ? Split::val : Split::test;
      if (split == Split::train) {
        train_sources.insert(p.source);
      } else if (train_sources.count(p.source)) {
        ++counts_.duplicates_dropped;
        continue;
      }
      BiblePair pair;
      pair.source = std::move(p.source);
      pair.target = std::move(p.target);
      add(split, std::move(pair), p.line);
    }
    name_ = concat(kWho, ":", options.path);
  }
}

// Token ids under the length caps, then each split's batches: rows sorted by length, cut
// greedily so that rows x the longest row stays within batch_tokens.
void TranslationDataset::tokenize_and_cut(const TranslationOptions& options) {
  for (Split split : {Split::train, Split::val, Split::test}) {
    SplitData& d = splits_[index(split)];
    const int64_t found = static_cast<int64_t>(d.sentences.size());
    std::vector<TranslationSentence> kept;
    for (TranslationSentence& s : d.sentences) {
      tokenizer_->encode(s.pair.source, s.source_ids);
      tokenizer_->encode(s.pair.target, s.target_ids);
      const bool too_long = static_cast<int64_t>(s.source_ids.size()) + 1 > source_len_ ||
                            static_cast<int64_t>(s.target_ids.size()) + 1 > seq_len_;
      if (too_long && split == Split::train) {
        ++counts_.too_long_dropped;
        continue;
      }
      if (too_long) {
        ++counts_.truncated[index(split)];
        s.source_ids.resize(std::min(s.source_ids.size(), static_cast<size_t>(source_len_ - 1)));
        s.target_ids.resize(std::min(s.target_ids.size(), static_cast<size_t>(seq_len_ - 1)));
      }
      if (s.source_ids.empty() || s.target_ids.empty()) continue;  // unreachable for UTF-8 text
      kept.push_back(std::move(s));
    }
    d.sentences = std::move(kept);
    counts_.sentences[index(split)] = static_cast<int64_t>(d.sentences.size());
    HEADLAB_CHECK(!d.sentences.empty(),
                  kWho << ": the " << split_name(split) << " split of " << name_ << " has no usable pair (" << found
                       << " found"
                       << (split == Split::train
                               ? concat(", ", counts_.too_long_dropped, " longer than data.seq_len/data.source_len")
                               : std::string())
                       << (options.path == kBibleAlias ? ")" : "; more lines, or other data.*_fraction?)"));

    // Sort key: the row's longest side; ties in corpus order (val/test) or by a seeded hash (train).
    auto width = [](const TranslationSentence& s) {
      return static_cast<int64_t>(std::max(s.source_ids.size(), s.target_ids.size())) + 1;
    };
    const uint64_t salt = hash_combine(seed_, 0x7472616e736c61ULL);
    auto key = [&](int64_t i) {
      const uint64_t tie = split == Split::train ? hash_combine(salt, static_cast<uint64_t>(i)) : 0;
      return std::tuple(width(d.sentences[static_cast<size_t>(i)]), tie, i);
    };
    d.order.resize(d.sentences.size());
    std::iota(d.order.begin(), d.order.end(), int64_t{0});
    std::sort(d.order.begin(), d.order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });

    for (int64_t k = 0; k < static_cast<int64_t>(d.order.size()); ++k) {
      const TranslationSentence& s = d.sentences[static_cast<size_t>(d.order[static_cast<size_t>(k)])];
      const auto S = static_cast<int64_t>(s.source_ids.size()) + 1, T = static_cast<int64_t>(s.target_ids.size()) + 1;
      Plan* p = d.plans.empty() ? nullptr : &d.plans.back();
      if (!p || (p->rows + 1) * std::max({p->seq_len, p->source_len, S, T}) > batch_tokens_) {
        d.plans.push_back({k, 0, 0, 0});
        p = &d.plans.back();
      }
      ++p->rows;
      p->seq_len = std::max(p->seq_len, T);
      p->source_len = std::max(p->source_len, S);
    }
    counts_.batches[index(split)] = static_cast<int64_t>(d.plans.size());
    for (const Plan& p : d.plans) {
      capacity_.batch_size = std::max(capacity_.batch_size, p.rows);
      capacity_.seq_len = std::max(capacity_.seq_len, p.seq_len);
      capacity_.source_len = std::max(capacity_.source_len, p.source_len);
    }
  }
}

BatchLayout TranslationDataset::batch_layout() const {
  BatchLayout layout;
  layout.key_padding = true;
  layout.source = true;
  layout.variable_shape = true;
  return layout;
}

BatchShape TranslationDataset::batch_capacity(int64_t) const {
  return capacity_;
}

int64_t TranslationDataset::eval_batches(Split split, int64_t) const {
  return split == Split::train ? 0 : static_cast<int64_t>(splits_[index(split)].plans.size());
}

Dataset::ExamplePosition TranslationDataset::example_position(Split split, int64_t example, int64_t) const {
  const SplitData& d = splits_[index(split)];
  HEADLAB_CHECK(split != Split::train && example >= 0 && example < static_cast<int64_t>(d.sentences.size()),
                "example " << example << " is outside the " << split_name(split) << " split (0 .. "
                           << static_cast<int64_t>(d.sentences.size()) - 1 << ", its sentences in corpus order)");
  const auto k = std::find(d.order.begin(), d.order.end(), example) - d.order.begin();
  for (size_t b = 0; b < d.plans.size(); ++b)
    if (k >= d.plans[b].begin && k < d.plans[b].begin + d.plans[b].rows)
      return {static_cast<int64_t>(b), k - d.plans[b].begin};
  throw Error(concat(kWho, ": sentence ", example, " of ", split_name(split), " is in no batch"));
}

// Train batch i is batch permuted(i mod n) of epoch i / n; val/test batch i is batch i.
const TranslationDataset::Plan& TranslationDataset::plan(Split split, int64_t batch_index) const {
  const std::vector<Plan>& plans = splits_[index(split)].plans;
  const auto n = static_cast<int64_t>(plans.size());
  HEADLAB_CHECK(
      batch_index >= 0 && (split == Split::train || batch_index < n),
      kWho << ": " << split_name(split) << " batch " << batch_index << " is outside the split's " << n << " batches");
  if (split != Split::train) return plans[static_cast<size_t>(batch_index)];
  const uint64_t key = hash_combine(hash_combine(seed_, 0x65706f6368ULL), static_cast<uint64_t>(batch_index / n));
  return plans[static_cast<size_t>(permuted(batch_index % n, n, key))];
}

std::span<const int64_t> TranslationDataset::batch_sentences(Split split, int64_t batch_index) const {
  const Plan& p = plan(split, batch_index);
  return std::span<const int64_t>(splits_[index(split)].order)
      .subspan(static_cast<size_t>(p.begin), static_cast<size_t>(p.rows));
}

std::string TranslationDataset::sentence_origin(Split split, int64_t sentence) const {
  const std::vector<TranslationSentence>& all = sentences(split);
  HEADLAB_CHECK(sentence >= 0 && sentence < static_cast<int64_t>(all.size()),
                kWho << ": " << split_name(split) << " sentence " << sentence << " of " << all.size());
  const TranslationSentence& s = all[static_cast<size_t>(sentence)];
  if (!s.pair.book.empty()) return concat(s.pair.book, " ", s.pair.chapter, ":", s.pair.verse);
  return concat(path_, ":", s.line);
}

void TranslationDataset::fill_batch(Split split, int64_t batch_index, Batch& out) const {
  const Plan& p = plan(split, batch_index);
  out.reshape(kWho, {p.rows, p.seq_len, p.source_len}, batch_layout());
  const SplitData& d = splits_[index(split)];
  const int64_t T = p.seq_len, S = p.source_len;
  for (int64_t r = 0; r < p.rows; ++r) {
    const TranslationSentence& s = d.sentences[static_cast<size_t>(d.order[static_cast<size_t>(p.begin + r)])];
    const auto m = static_cast<int64_t>(s.source_ids.size()), n = static_cast<int64_t>(s.target_ids.size());
    int32_t* tokens = out.tokens.data() + r * T;
    int32_t* targets = out.targets.data() + r * T;
    uint8_t* padding = out.key_padding.data() + r * T;
    for (int64_t t = 0; t < T; ++t) {
      const bool real = t <= n;
      tokens[t] = !real ? specials_.pad : t == 0 ? specials_.bos : s.target_ids[static_cast<size_t>(t - 1)];
      targets[t] = !real ? -1 : t == n ? specials_.eos : s.target_ids[static_cast<size_t>(t)];
      padding[t] = real;
    }
    int32_t* source = out.source_tokens.data() + r * S;
    uint8_t* source_padding = out.source_padding.data() + r * S;
    for (int64_t t = 0; t < S; ++t) {
      source[t] = t < m ? s.source_ids[static_cast<size_t>(t)] : t == m ? specials_.eos : specials_.pad;
      source_padding[t] = t <= m;
    }
  }
}

std::vector<int64_t> TranslationDataset::train_token_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size()));
  for (const TranslationSentence& s : sentences(Split::train)) {
    for (const int32_t id : s.source_ids) ++counts[static_cast<size_t>(id)];
    for (const int32_t id : s.target_ids) ++counts[static_cast<size_t>(id)];
    counts[static_cast<size_t>(specials_.bos)]++;  // the decoder's first input
    counts[static_cast<size_t>(specials_.eos)]++;  // the source's last token
  }
  return counts;
}

}  // namespace headlab
