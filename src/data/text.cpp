// Text: the KJV Bible export, file loading with one-line errors, contiguous splits, their
// tokens, and the window sampler. See include/headlab/data/text.h and datasets/README.md.
#include "headlab/data/text.h"

#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string_view>

#include "headlab/common/error.h"
#include "headlab/common/paths.h"
#include "headlab/common/subprocess.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kKjvVerses = 31102;  // Gen 1:1 .. Rev 22:21 in the King James Version

// Length of the verse label at the start of a `bible` output line ("Ge1:1 ", "1Chr3:4 ",
// "SSol1:1 "): optional digit, book letters, chapter digits, ':', verse digits, one space.
// Returns 0 when the line does not start with a label.
size_t verse_label_length(std::string_view line) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    return i > from;
  };
  if (i < line.size() && line[i] >= '1' && line[i] <= '3') ++i;
  const size_t letters_from = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  if (i == letters_from || !digits() || i >= line.size() || line[i++] != ':' || !digits()) return 0;
  if (i >= line.size() || line[i] != ' ') return 0;
  return i + 1;
}

// data.require_utf8: the whole file is UTF-8 text, without NUL bytes.
void check_utf8_text(const std::vector<uint8_t>& bytes, const std::string& path) {
  const auto nul = std::find(bytes.begin(), bytes.end(), uint8_t(0));
  HEADLAB_CHECK(nul == bytes.end(), "text dataset: " << path << " is not UTF-8 text: NUL byte at offset "
                                                     << (nul - bytes.begin()) << " (data.require_utf8)");
  const int64_t bad = first_invalid_utf8({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  if (bad >= 0) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", bytes[static_cast<size_t>(bad)]);
    HEADLAB_CHECK(false, "text dataset: " << path << " is not valid UTF-8: bad sequence starting with byte " << hex
                                          << " at offset " << bad << " (data.require_utf8)");
  }
}

std::vector<uint8_t> read_text_file(const std::string& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  HEADLAB_CHECK(!ec, "text dataset: cannot read " << path << ": " << ec.message());
  HEADLAB_CHECK(exists, "text dataset: no such file: " << path << " (data.path)");
  HEADLAB_CHECK(!fs::is_directory(path, ec), "text dataset: cannot read " << path << ": it is a directory");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  HEADLAB_CHECK(f, "text dataset: cannot read " << path << ": " << std::strerror(errno));
  std::vector<uint8_t> bytes;
  const uintmax_t size_hint = fs::file_size(path, ec);
  if (!ec) bytes.reserve(static_cast<size_t>(size_hint));
  uint8_t chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  const bool failed = std::ferror(f);
  const int read_errno = errno;
  std::fclose(f);
  HEADLAB_CHECK(!failed, "text dataset: cannot read " << path << ": " << std::strerror(read_errno));
  HEADLAB_CHECK(!bytes.empty(), "text dataset: " << path << " is empty");

  return bytes;
}

// data.path names the Bible: the alias, the old default, or the cache file itself (`cache_path`,
// "" = the user's, looked up only for a file of that name: a run on other text never needs HOME).
bool names_bible_cache(const std::string& path, const std::string& cache_path) {
  if (path == kBibleAlias) return true;
  const fs::path p = fs::path(path).lexically_normal();
  if (p == fs::path(kOldBibleCachePath)) return true;
  if (cache_path.empty())
    return p.filename() == "bible-kjv.txt" && p == fs::path(bible_cache_path()).lexically_normal();
  return p == fs::path(cache_path).lexically_normal();
}

// The text tokenizer `options` names, sentencepiece trained on the lines of `train_block`.
std::unique_ptr<Tokenizer> make_text_tokenizer(const TextOptions& options, std::string_view train_block) {
  TokenizerOptions t{
      .kind = options.tokenizer, .vocab_size = options.vocab_size, .model_type = options.tokenizer_model};
  std::vector<std::string> lines;
  if (t.kind == "sentencepiece") {
    for (size_t at = 0; at < train_block.size();) {
      const size_t end = std::min(train_block.find('\n', at), train_block.size());
      if (end > at) lines.emplace_back(train_block.substr(at, end - at));
      at = end + 1;
    }
  }
  return make_tokenizer(t, lines);
}

const char* unit(const Tokenizer& tokenizer) {
  return std::string_view(tokenizer.kind()) == "bytes" ? "bytes" : "tokens";
}

}  // namespace

int64_t first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c == 0xE0)
      len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
      len = 3;
    else if (c == 0xED)
      len = 3, hi = 0x9F;
    else if (c == 0xF0)
      len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      len = 4;
    else if (c == 0xF4)
      len = 4, hi = 0x8F;
    else
      return static_cast<int64_t>(i);
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return static_cast<int64_t>(i);
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

std::string repair_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (int64_t bad; (bad = first_invalid_utf8(text)) >= 0; text.remove_prefix(static_cast<size_t>(bad) + 1)) {
    out.append(text.substr(0, static_cast<size_t>(bad)));
    out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
  }
  out.append(text);
  return out;
}

std::string text_token_label(int32_t token) {
  if (token == '\n') return "\\n";
  if (token >= 32 && token < 127) return std::string(1, static_cast<char>(token));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", token & 0xff);
  return buf;
}

std::string portable_text_path(const std::string& path) {
  if (path == kBibleAlias || fs::path(path).lexically_normal() == fs::path(kOldBibleCachePath)) return kBibleAlias;
  return fs::absolute(path).lexically_normal().string();
}

std::string bible_cache_path() {
  return (user_cache_dir() / "bible-kjv.txt").string();
}

std::string ensure_bible_corpus(const std::string& cache_path) {
  std::error_code ec;
  if (fs::exists(cache_path, ec)) return cache_path;
  HEADLAB_CHECK(program_on_path("bible"), "bible corpus: the `bible` program is not installed, so "
                                              << cache_path << " cannot be exported: apt-get install bible-kjv");
  const fs::path parent = fs::path(cache_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  HEADLAB_CHECK(!ec, "bible corpus: cannot create directory " << parent.string() << " for " << cache_path << ": "
                                                              << ec.message());

  // Write to a private temp file and rename: rename is atomic, so a reader (or a second run
  // exporting at the same time) sees either no file or the whole corpus.
  const std::string tmp_path = cache_path + ".tmp." + std::to_string(::getpid());
  std::FILE* out = std::fopen(tmp_path.c_str(), "wb");
  HEADLAB_CHECK(out, "bible corpus: cannot write " << tmp_path << ": " << std::strerror(errno));
  int64_t verses = 0, unlabelled_line = 0;
  ChildProcess bible;
  bible.args = {"bible", "-f", "Gen1:1-Rev22:21"};
  bible.env = current_environment();
  int status = -1;
  try {
    status = run_child_reading_lines(bible, [&](std::string_view text) {
      if (text.empty()) return;
      ++verses;
      const size_t label = verse_label_length(text);
      if (label == 0 && unlabelled_line == 0) unlabelled_line = verses;
      text.remove_prefix(label);
      std::fwrite(text.data(), 1, text.size(), out);
      std::fputc('\n', out);
    });
  } catch (...) {
    std::fclose(out);
    std::remove(tmp_path.c_str());
    throw;
  }
  const bool write_failed = std::ferror(out) != 0;
  const bool close_failed = std::fclose(out) != 0;
  std::string problem;
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    problem = "`bible -f \"Gen1:1-Rev22:21\"` failed (exit status " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
  else if (verses != kKjvVerses)
    problem = "`bible` printed " + std::to_string(verses) + " verses, expected " + std::to_string(kKjvVerses);
  else if (unlabelled_line != 0)
    problem = "line " + std::to_string(unlabelled_line) + " of `bible` output has no verse label";
  else if (write_failed || close_failed)
    problem = "cannot write " + tmp_path;
  if (problem.empty()) {
    fs::rename(tmp_path, cache_path, ec);
    if (ec) problem = "cannot rename " + tmp_path + ": " + ec.message();
  }
  if (!problem.empty()) {
    std::remove(tmp_path.c_str());
    HEADLAB_CHECK(false, "bible corpus: exporting " << cache_path << ": " << problem);
  }
  return cache_path;
}

TextDataset::TextDataset(const TextOptions& options)
    : path_(options.path), seq_len_(options.seq_len), seed_(options.seed) {
  HEADLAB_CHECK(seq_len_ > 0, "text dataset: data.seq_len=" << seq_len_ << " must be positive");
  const double train = options.train_fraction, val = options.val_fraction;
  HEADLAB_CHECK(train > 0 && val > 0 && train + val < 1,
                "text dataset: split fractions train=" << train << " val=" << val
                                                       << " must be positive and leave a test block (train + val < 1)");
  if (names_bible_cache(path_, options.bible_cache))
    path_ = ensure_bible_corpus(options.bible_cache.empty() ? bible_cache_path() : options.bible_cache);
  const std::vector<uint8_t> bytes = read_text_file(path_);
  // Subwords are pieces of Unicode text: sentencepiece needs UTF-8 to round-trip it.
  if (options.require_utf8 || options.tokenizer == "sentencepiece") check_utf8_text(bytes, path_);

  size_bytes_ = static_cast<int64_t>(bytes.size());
  const int64_t n = size_bytes_;
  const int64_t train_end = static_cast<int64_t>(std::floor(static_cast<double>(n) * train));
  const int64_t val_end = static_cast<int64_t>(std::floor(static_cast<double>(n) * (train + val)));
  bytes_[static_cast<int>(Split::train)] = {0, train_end};
  bytes_[static_cast<int>(Split::val)] = {train_end, val_end};
  bytes_[static_cast<int>(Split::test)] = {val_end, n};
  auto block_text = [&](Split split) {
    const ByteRange r = split_bytes(split);
    return std::string_view(reinterpret_cast<const char*>(bytes.data()) + r.begin, static_cast<size_t>(r.size()));
  };
  tokenizer_ =
      options.stored_tokenizer ? options.stored_tokenizer : make_text_tokenizer(options, block_text(Split::train));
  HEADLAB_CHECK(tokenizer_->kind() == options.tokenizer, "text dataset: the stored tokenizer is "
                                                             << tokenizer_->kind() << ", data.tokenizer is "
                                                             << options.tokenizer);
  std::vector<int32_t> block_tokens;
  for (Split split : {Split::train, Split::val, Split::test}) {
    tokenizer_->encode(block_text(split), block_tokens);
    const auto begin = static_cast<int64_t>(tokens_.size());
    tokens_.insert(tokens_.end(), block_tokens.begin(), block_tokens.end());
    ranges_[static_cast<int>(split)] = {begin, static_cast<int64_t>(tokens_.size())};
  }
  for (Split split : {Split::train, Split::val, Split::test}) {
    const ByteRange r = split_range(split), b = split_bytes(split);
    HEADLAB_CHECK(r.size() >= seq_len_ + 1,
                  "text dataset: " << path_ << " is too short for seq_len=" << seq_len_ << ": its " << split_name(split)
                                   << " block (bytes " << b.begin << ".." << b.end << " of " << n << ") has "
                                   << r.size() << " " << unit(*tokenizer_) << ", needs at least " << seq_len_ + 1);
  }
  // Eval tile k goes to position (k * stride) mod W; a stride near W / golden ratio that is
  // coprime with W makes this a permutation whose every prefix is spread over the block.
  for (Split split : {Split::val, Split::test}) {
    const int64_t w = eval_windows(split);
    int64_t stride = std::max<int64_t>(1, std::llround(static_cast<double>(w) * 0.6180339887498949));
    while (std::gcd(stride, w) != 1) ++stride;
    eval_stride_[static_cast<int>(split)] = stride;
  }
}

ByteRange TextDataset::split_range(Split split) const {
  return ranges_[static_cast<int>(split)];
}

ByteRange TextDataset::split_bytes(Split split) const {
  return bytes_[static_cast<int>(split)];
}

double TextDataset::bytes_per_token(Split split) const {
  return static_cast<double>(split_bytes(split).size()) / static_cast<double>(split_range(split).size());
}

int64_t TextDataset::eval_windows(Split split) const {
  return (split_range(split).size() - 1) / seq_len_;
}

int64_t TextDataset::eval_batches(Split split, int64_t batch_size) const {
  HEADLAB_CHECK(batch_size > 0, "text dataset: batch_size=" << batch_size << " must be positive");
  if (split == Split::train) return 0;
  return (eval_windows(split) + batch_size - 1) / batch_size;
}

std::vector<int64_t> TextDataset::train_token_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size()));
  const ByteRange r = split_range(Split::train);
  for (int64_t i = r.begin; i < r.end; ++i) counts[static_cast<size_t>(tokens_[static_cast<size_t>(i)])]++;
  return counts;
}

int64_t TextDataset::window_start(Split split, int64_t batch_index, int64_t row, int64_t batch_size) const {
  const ByteRange r = split_range(split);
  if (split == Split::train) {
    RowRng rng(seed_, split, batch_index, row);
    return r.begin + static_cast<int64_t>(rng.below(static_cast<uint64_t>(r.size() - seq_len_)));
  }
  const int64_t w = eval_windows(split);
  const int64_t k = batch_index * batch_size + row;
  if (k >= w) return -1;
  const auto tile =
      static_cast<int64_t>(static_cast<unsigned __int128>(k) *
                           static_cast<uint64_t>(eval_stride_[static_cast<int>(split)]) % static_cast<uint64_t>(w));
  return r.begin + tile * seq_len_;
}

void TextDataset::fill_batch(Split split, int64_t batch_index, Batch& out) const {
  out.check_shape("text dataset", seq_len_);
  HEADLAB_CHECK(batch_index >= 0, "text dataset: batch_index=" << batch_index << " must be >= 0");
  const int64_t B = out.batch_size, T = seq_len_;
  for (int64_t row = 0; row < B; ++row) {
    const int64_t start = window_start(split, batch_index, row, B);
    int32_t* tokens = out.tokens.data() + row * T;
    int32_t* targets = out.targets.data() + row * T;
    if (start < 0) {  // eval row past the last tile: padding the loss ignores
      std::fill(tokens, tokens + T, 0);
      std::fill(targets, targets + T, -1);
    } else {
      const int32_t* window = tokens_.data() + start;
      for (int64_t t = 0; t < T; ++t) {
        tokens[t] = window[t];
        targets[t] = window[t + 1];
      }
    }
    if (!out.key_padding.empty()) std::fill_n(out.key_padding.data() + row * T, T, uint8_t(start >= 0));
  }
}

}  // namespace headlab
