// The sentencepiece tokenizer (data.tokenizer = "sentencepiece"): training from in-memory lines,
// and loading a stored model without ever letting a corrupt one crash the process. See
// include/headlab/data/tokenizer.h for the ids and what round-trips.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "headlab/common/error.h"
#include "headlab/data/tokenizer.h"

namespace headlab {

namespace {

constexpr int64_t kMinVocab = 8;        // the 4 specials, the newline and a few pieces
constexpr const char* kNewline = "\n";  // a user-defined piece: lines are encoded apart, joined by it

// The trainer's message without its source location ("Internal: ./src/x.cc(660) [(a) == (b)] Why").
std::string status_text(const sentencepiece::util::Status& status) {
  std::string text = status.error_message();
  if (const size_t bracket = text.find("] "); bracket != std::string::npos && text.find(".cc(") < bracket)
    text = text.substr(bracket + 2);
  for (char& c : text)
    if (c == '\n') c = ' ';
  return text;
}

// The number after `marker` in `text`, if there is one.
std::optional<long long> number_after(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + marker.size(), digits = 0;
  long long value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 18)
    value = value * 10 + (text[i++] - '0'), ++digits;
  if (digits == 0) return std::nullopt;
  return value;
}

// One line for a failed training: the vocabulary size the text allows when the trainer says it.
std::string training_problem(const TokenizerOptions& options, const std::string& why) {
  if (const auto at_most = number_after(why, "set it to a value <= "))
    return concat("data.vocab_size=", options.vocab_size, " is more than sentencepiece (", options.model_type,
                  ") can make from the training text: lower it to at most ", *at_most);
  if (const auto chars = number_after(why, " vs "))
    return concat("data.vocab_size=", options.vocab_size, " is too small for the ", *chars - 5,
                  " distinct characters of the training text plus 5 fixed pieces: raise it to at least ", *chars);
  return concat("sentencepiece training failed: ", why);
}

// Feeds the trainer the lines of `text`, each entry split at '\n', empty lines skipped.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& text) : text_(text) { advance(); }
  bool done() const override { return entry_ >= text_.size(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // Moves to the next non-empty line: the rest of the current entry, else the next entries.
  void advance() {
    while (entry_ < text_.size()) {
      const std::string& s = text_[entry_];
      if (at_ > s.size()) {
        ++entry_, at_ = 0;
        continue;
      }
      const size_t end = std::min(s.find('\n', at_), s.size());
      line_.assign(s, at_, end - at_);
      at_ = end + 1;
      if (!line_.empty()) return;
    }
  }
  const std::vector<std::string>& text_;
  size_t entry_ = 0, at_ = 0;
  std::string line_;
};

// A reader of protobuf's wire format, enough to look at a few fields of a model before
// sentencepiece parses it (protobuf itself is robust; some of what it accepts is not).
struct WireReader {
  std::string_view in;
  bool ok = true;

  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in.empty()) return ok = false;
      const auto byte = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return ok = false;
  }
  // The next field: its number, wire type, and (varints) value or (length-delimited) bytes.
  bool field(uint32_t& number, uint32_t& wire, uint64_t& value, std::string_view& bytes) {
    uint64_t key = 0;
    if (in.empty() || !varint(key)) return false;
    number = static_cast<uint32_t>(key >> 3), wire = key & 7;
    switch (wire) {
      case 0:
        return varint(value);
      case 1:
      case 5: {
        const size_t n = wire == 1 ? 8 : 4;
        if (in.size() < n) return ok = false;
        in.remove_prefix(n);
        return true;
      }
      case 2:
        if (!varint(value) || value > in.size()) return ok = false;
        bytes = in.substr(0, value);
        in.remove_prefix(value);
        return true;
      default:
        return ok = false;  // groups (3, 4) are not in sentencepiece's schema
    }
  }
};

// Why the model proto `model` is not one headlab loads, or "". sentencepiece trusts two things
// protobuf cannot check: a normalizer's precompiled character map (a double-array trie it walks
// without bounds checks) and the model type. headlab's models are trained with the identity
// normalizer (no map) and are unigram or BPE, so anything else is refused here.
std::string model_proto_problem(std::string_view model) {
  WireReader top{model};
  uint32_t number = 0, wire = 0;
  uint64_t value = 0;
  std::string_view bytes;
  while (top.field(number, wire, value, bytes)) {
    if (wire != 2 || (number != 2 && number != 3 && number != 5)) continue;
    WireReader inner{bytes};
    uint32_t n = 0, w = 0;
    uint64_t v = 0;
    std::string_view b;
    while (inner.field(n, w, v, b)) {
      if (number == 2 && n == 3 && w == 0 && v != 1 && v != 2)
        return concat("its model type is ", v, ", not unigram (1) or bpe (2)");
      if (number != 2 && n == 2 && w == 2 && !b.empty())
        return "its normalizer has a character map (headlab's have none)";
    }
    if (!inner.ok) return "it is not a sentencepiece model (malformed protobuf)";
  }
  if (!top.ok) return "it is not a sentencepiece model (malformed protobuf)";
  return "";
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string serialized)
      : sp_(std::move(sp)), serialized_(std::move(serialized)), newline_(sp_->PieceToId(kNewline)) {}

  const char* kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  SpecialTokens specials() const override { return {.pad = 0, .unk = 1, .bos = 2, .eos = 3}; }

  // Line by line, as the trainer saw the text, with the newline piece between lines.
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    ids.clear();
    std::vector<int> line_ids;
    size_t at = 0;
    while (true) {
      const size_t end = std::min(text.find('\n', at), text.size());
      if (end > at) {
        const auto status = sp_->Encode(text.substr(at, end - at), &line_ids);
        HEADLAB_CHECK(status.ok(), "tokenizer sentencepiece: cannot encode: " << status_text(status));
        ids.insert(ids.end(), line_ids.begin(), line_ids.end());
      }
      if (end == text.size()) break;
      ids.push_back(newline_);
      at = end + 1;
    }
  }

  std::string decode(const int32_t* ids, int64_t n) const override {
    std::vector<int> pieces(ids, ids + n);
    for (int id : pieces)
      HEADLAB_CHECK(id >= 0 && id < vocab_size(),
                    "tokenizer sentencepiece: id " << id << " is outside [0, " << vocab_size() << ")");
    std::string text;
    const auto status = sp_->Decode(pieces, &text);
    HEADLAB_CHECK(status.ok(), "tokenizer sentencepiece: cannot decode: " << status_text(status));
    return text;
  }

  std::string token_label(int32_t id) const override {
    HEADLAB_CHECK(id >= 0 && id < vocab_size(),
                  "tokenizer sentencepiece: id " << id << " is outside [0, " << vocab_size() << ")");
    return id == newline_ ? "\\n" : sp_->IdToPiece(id);
  }

  std::string serialized() const override { return serialized_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string serialized_;  // as trained or loaded, so that serialized() is bit for bit the input
  int32_t newline_;
};

// The processor of `serialized`, or why it is refused: never a crash on any bytes.
std::unique_ptr<Tokenizer> build_sentencepiece(const std::string& serialized, std::string& problem) {
  problem = model_proto_problem(serialized);
  if (!problem.empty()) return nullptr;
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  try {  // its trie builder (darts-clone) throws on keys it cannot store
    const auto status = sp->LoadFromSerializedProto(serialized);
    if (!status.ok()) {
      problem = status_text(status);
      return nullptr;
    }
  } catch (const std::exception& e) {
    problem = e.what();
    return nullptr;
  }
  const int n = sp->GetPieceSize();
  const char* fixed[] = {"<pad>", "<unk>", "<s>", "</s>"};
  for (int id = 0; id < 4; ++id)
    if (n <= id || sp->IdToPiece(id) != fixed[id] || !(id == 1 ? sp->IsUnknown(id) : sp->IsControl(id))) {
      problem = concat("id ", id, " is not ", fixed[id], " (headlab's specials are <pad> <unk> <s> </s> = 0..3)");
      return nullptr;
    }
  if (sp->PieceToId(kNewline) == sp->unk_id()) {
    problem = "it has no newline piece";
    return nullptr;
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(sp), serialized);
}

}  // namespace

std::unique_ptr<Tokenizer> train_sentencepiece(const TokenizerOptions& options,
                                               const std::vector<std::string>& training_text) {
  HEADLAB_CHECK(options.model_type == "unigram" || options.model_type == "bpe",
                "data.tokenizer_model: unknown sentencepiece model '" << options.model_type << "' (unigram|bpe)");
  HEADLAB_CHECK(options.vocab_size >= kMinVocab, "data.vocab_size=" << options.vocab_size << " must be at least "
                                                                    << kMinVocab << " for the sentencepiece tokenizer");
  // One thread and every sentence in order: the same text gives the same model, bit for bit.
  // The identity normalizer and no whitespace clean-up or dummy prefix: decode(encode(x)) == x.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      {"user_defined_symbols", kNewline},
      {"character_coverage", "1.0"},  // every character of the training text is a piece
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", "2"},  // its progress report is long; errors come back in the status
  };
  LineIterator lines(training_text);
  HEADLAB_CHECK(!lines.done(), "sentencepiece: no training text (every line is empty)");
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &serialized);
  HEADLAB_CHECK(status.ok(), training_problem(options, status_text(status)));
  std::string problem;
  std::unique_ptr<Tokenizer> tokenizer = build_sentencepiece(serialized, problem);
  HEADLAB_CHECK(tokenizer, "sentencepiece: the model just trained does not load: " << problem);
  return tokenizer;
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& serialized, const std::string& origin) {
  std::string problem;
  std::unique_ptr<Tokenizer> tokenizer = build_sentencepiece(serialized, problem);
  HEADLAB_CHECK(tokenizer, origin << ": corrupt sentencepiece tokenizer model: " << problem);
  return tokenizer;
}

}  // namespace headlab
