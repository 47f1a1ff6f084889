#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/text.h"
#include "support/scratch.h"
#include "support/skip.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// A unique path under the system temp directory, removed (file or directory tree) on scope exit.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& tag) {
    static int counter = 0;
    path = (fs::temp_directory_path() /
            ("headlab_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
               .string();
  }
  ~TempPath() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
};

struct TempFile : TempPath {
  TempFile(const std::string& tag, const std::string& content) : TempPath(tag) {
    std::ofstream(path, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
  }
};

// Seeded lowercase words and newlines: every window of a few bytes is almost surely unique.
std::string random_text(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, ' ');
  for (char& c : s) {
    const uint64_t r = rng() % 32;
    c = r < 26 ? static_cast<char>('a' + r) : (r < 31 ? ' ' : '\n');
  }
  return s;
}

TextOptions options_for(const std::string& path, int64_t seq_len = 16, uint64_t seed = 7) {
  TextOptions options;
  options.path = path;
  options.seq_len = seq_len;
  options.seed = seed;
  return options;
}

TextOptions utf8_options_for(const std::string& path) {
  TextOptions options = options_for(path);
  options.require_utf8 = true;
  return options;
}

// The message TextDataset throws for `options`, or "" if it does not throw.
std::string load_error(const TextOptions& options) {
  try {
    TextDataset dataset(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void require_one_line_naming(const std::string& message, const std::string& path, const std::string& what) {
  INFO(message);
  REQUIRE(!message.empty());
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find(what) != std::string::npos);
}

constexpr Split kSplits[] = {Split::train, Split::val, Split::test};

}  // namespace

TEST_CASE("text batches are the file's bytes at the sampled windows with targets shifted by one", "[data][text]") {
  const std::string content = random_text(4000, 1);
  TempFile file("content", content);
  TextDataset dataset(options_for(file.path));
  REQUIRE(dataset.vocab_size() == 256);
  REQUIRE(dataset.bytes_per_token(Split::val) == 1.0);
  REQUIRE(dataset.size_bytes() == 4000);
  const int64_t T = dataset.seq_len(), B = 5;
  Batch batch = dataset.make_batch(B);
  for (Split split : kSplits) {
    for (int64_t index = 0; index < 3; ++index) {
      dataset.fill_batch(split, index, batch);
      for (int64_t row = 0; row < B; ++row) {
        const int64_t start = dataset.window_start(split, index, row, B);
        REQUIRE(start >= (split == Split::train ? 0 : -1));
        if (start < 0) continue;  // an eval row past the last tile (its own test is below)
        for (int64_t t = 0; t < T; ++t) {
          REQUIRE(batch.tokens[row * T + t] == static_cast<uint8_t>(content[start + t]));
          REQUIRE(batch.targets[row * T + t] == static_cast<uint8_t>(content[start + t + 1]));
          if (t + 1 < T) REQUIRE(batch.targets[row * T + t] == batch.tokens[row * T + t + 1]);
        }
      }
    }
  }
}

TEST_CASE("the same seed, split and batch index give an identical batch, and a new index a different one",
          "[data][text]") {
  TempFile file("determinism", random_text(4000, 2));
  // Two datasets stand for a run and its resume: nothing is shared but the options.
  TextDataset run(options_for(file.path, 16, 7)), resumed(options_for(file.path, 16, 7));
  TextDataset other_seed(options_for(file.path, 16, 8));
  Batch a = run.make_batch(4), b = resumed.make_batch(4);
  for (Split split : kSplits) {
    run.fill_batch(split, 1, a);
    resumed.fill_batch(split, 1, b);
    REQUIRE(a.tokens == b.tokens);
    REQUIRE(a.targets == b.targets);
    resumed.fill_batch(split, 0, b);
    CHECK(a.tokens != b.tokens);
  }
  run.fill_batch(Split::train, 3, a);
  other_seed.fill_batch(Split::train, 3, b);
  CHECK(a.tokens != b.tokens);  // the seed picks the training windows...
  run.fill_batch(Split::val, 0, a);
  other_seed.fill_batch(Split::val, 0, b);
  CHECK(a.tokens == b.tokens);  // ...but evaluation windows are fixed, so val losses compare across seeds
}

TEST_CASE("text splits are contiguous disjoint blocks and no window crosses a boundary", "[data][text]") {
  const int64_t n = 5000;
  TempFile file("splits", random_text(n, 3));
  TextOptions options = options_for(file.path, 32);
  SECTION("the default 90/5/5 split") {}
  SECTION("a configured 80/15/5 split") {
    options.train_fraction = 0.80, options.val_fraction = 0.15;
  }
  TextDataset dataset(options);
  const ByteRange train = dataset.split_range(Split::train), val = dataset.split_range(Split::val),
                  test = dataset.split_range(Split::test);
  CHECK(train.begin == 0);
  CHECK(train.end == static_cast<int64_t>(std::floor(n * options.train_fraction)));
  CHECK(val.begin == train.end);
  CHECK(val.end == static_cast<int64_t>(std::floor(n * (options.train_fraction + options.val_fraction))));
  CHECK(test.begin == val.end);
  CHECK(test.end == n);

  const int64_t T = dataset.seq_len(), B = 8;
  std::vector<int> used_by(static_cast<size_t>(n), -1);  // which split's windows read each byte
  bool mixed = false;
  for (Split split : kSplits) {
    const ByteRange r = dataset.split_range(split);
    const int64_t batches = split == Split::train ? 2000 : dataset.eval_batches(split, B);
    for (int64_t index = 0; index < batches; ++index) {
      for (int64_t row = 0; row < B; ++row) {
        const int64_t start = dataset.window_start(split, index, row, B);
        if (start < 0) continue;
        REQUIRE(start >= r.begin);
        REQUIRE(start + T + 1 <= r.end);
        for (int64_t i = start; i <= start + T; ++i) {
          int& owner = used_by[static_cast<size_t>(i)];
          mixed |= owner != -1 && owner != static_cast<int>(split);
          owner = static_cast<int>(split);
        }
      }
    }
  }
  CHECK_FALSE(mixed);
  // Random training windows reach both ends of the train block.
  CHECK(used_by[0] == static_cast<int>(Split::train));
  CHECK(used_by[static_cast<size_t>(train.end - 1)] == static_cast<int>(Split::train));
}

TEST_CASE("text's training token counts are the byte counts of the train block alone", "[data][text]") {
  std::string content = random_text(2000, 5);
  content[1900] = '#';  // a byte that occurs only in the test block
  TempFile file("counts", content);
  TextDataset dataset(options_for(file.path));
  const std::vector<int64_t> counts = dataset.train_token_counts();
  REQUIRE(counts.size() == 256);
  std::vector<int64_t> expected(256);
  for (int64_t i = 0; i < dataset.split_range(Split::train).end; ++i) expected[static_cast<uint8_t>(content[i])]++;
  CHECK(counts == expected);
  CHECK(counts['#'] == 0);
  CHECK(counts['e'] > 0);
}

TEST_CASE("one pass of eval batches predicts every val and test byte exactly once", "[data][text]") {
  TempFile file("eval", random_text(4000, 4));
  TextDataset dataset(options_for(file.path, 16));
  const int64_t T = dataset.seq_len(), B = 5;
  CHECK(dataset.eval_batches(Split::train, B) == 0);
  Batch batch = dataset.make_batch(B);
  for (Split split : {Split::val, Split::test}) {
    const ByteRange r = dataset.split_range(split);
    const int64_t tiles = dataset.eval_windows(split);
    REQUIRE(tiles == (r.size() - 1) / T);
    REQUIRE(dataset.eval_batches(split, B) == (tiles + B - 1) / B);
    std::vector<int> predicted(static_cast<size_t>(dataset.size_bytes()), 0);
    int64_t padding_rows = 0;
    for (int64_t index = 0; index < dataset.eval_batches(split, B); ++index) {
      dataset.fill_batch(split, index, batch);
      for (int64_t row = 0; row < B; ++row) {
        const int64_t start = dataset.window_start(split, index, row, B);
        if (start < 0) {
          ++padding_rows;
          for (int64_t t = 0; t < T; ++t) REQUIRE(batch.targets[row * T + t] == -1);
          continue;
        }
        for (int64_t t = 1; t <= T; ++t) ++predicted[static_cast<size_t>(start + t)];
      }
    }
    CHECK(padding_rows == dataset.eval_batches(split, B) * B - tiles);
    for (int64_t i = 0; i < dataset.size_bytes(); ++i) {
      const bool inside = i >= r.begin + 1 && i < r.begin + 1 + tiles * T;
      INFO(split_name(split) << " byte " << i);
      REQUIRE(predicted[static_cast<size_t>(i)] == (inside ? 1 : 0));
    }
  }
}

TEST_CASE("each text file problem is one error line naming the path", "[data][text]") {
  SECTION("missing file") {
    TempPath missing("missing");
    require_one_line_naming(load_error(options_for(missing.path)), missing.path, "no such file");
  }
  SECTION("unreadable: a directory") {
    TempPath dir("dir");
    fs::create_directory(dir.path);
    require_one_line_naming(load_error(options_for(dir.path)), dir.path, "cannot read");
  }
  SECTION("unreadable: no read permission") {
    TempFile file("noperm", random_text(4000, 5));
    fs::permissions(file.path, fs::perms::none);
    if (::geteuid() != 0) {
      require_one_line_naming(load_error(options_for(file.path)), file.path, "cannot read");
      return;
    }
    // Root reads any file (CI runs as root): run headlab as `nobody` (util-linux's setpriv), whose
    // first act, loading data.path, must fail with the line. exec, not code run after fork().
    const fs::path log = file.path + ".log";
    const test::CommandResult r =
        test::run_program("/usr/bin/setpriv",
                          {"--reuid=65534", "--regid=65534", "--clear-groups", test::headlab_binary(), "train",
                           (fs::path(HEADLAB_SOURCE_DIR) / "configs" / "default.toml").string(), "--set",
                           "data.path=" + file.path, "--out", file.path + ".run"},
                          log);
    CHECK(r.code == 2);
    const std::string output = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
    const std::string message = output.substr(output.rfind('\n') + 1);  // after the "training ..." line
    CHECK(message.rfind("headlab train: error: ", 0) == 0);
    require_one_line_naming(message, file.path, "cannot read");
  }
  SECTION("empty file") {
    TempFile file("empty", "");
    require_one_line_naming(load_error(options_for(file.path)), file.path, "is empty");
  }
  SECTION("data.require_utf8: a NUL byte") {
    std::string content = random_text(4000, 6);
    content[123] = '\0';
    TempFile file("nul", content);
    require_one_line_naming(load_error(utf8_options_for(file.path)), file.path, "NUL byte at offset 123");
  }
  SECTION("data.require_utf8: not UTF-8") {
    std::string content = random_text(4000, 7);
    content[77] = static_cast<char>(0xFF);
    TempFile file("latin", content);
    require_one_line_naming(load_error(utf8_options_for(file.path)), file.path, "not valid UTF-8");
    require_one_line_naming(load_error(utf8_options_for(file.path)), file.path, "0xFF at offset 77");
  }
  SECTION("data.require_utf8: a UTF-16 surrogate encoded in UTF-8") {
    std::string content = random_text(4000, 8) + "\xED\xA0\x80";
    TempFile file("surrogate", content);
    require_one_line_naming(load_error(utf8_options_for(file.path)), file.path, "0xED at offset 4000");
  }
  SECTION("too short for seq_len+1 in a split") {
    // 1000 bytes: the val and test blocks hold 50 bytes each, fewer than 64 + 1.
    TempFile file("short", random_text(1000, 9));
    require_one_line_naming(load_error(options_for(file.path, 64)), file.path, "its val block");
    require_one_line_naming(load_error(options_for(file.path, 64)), file.path, "needs at least 65");
  }
}

TEST_CASE("text reads any bytes; data.require_utf8 checks the whole file", "[data][text]") {
  std::string text;
  while (text.size() < 4000) text += "h\xC3\xA9llo w\xC3\xB6rld \xE2\x80\x94 \xE2\x98\x83 \xF0\x9F\x98\x80\n";
  TempFile utf8("utf8", text);
  CHECK_NOTHROW(TextDataset(utf8_options_for(utf8.path)));

  // Latin-1 ("caf\xE9") and NUL bytes are bytes like any other to a byte model.
  std::string latin = random_text(4000, 12);
  latin[3] = static_cast<char>(0xE9);
  latin[2000] = '\0';
  TempFile raw("latin1", latin);
  const TextDataset bytes(options_for(raw.path));
  CHECK(bytes.size_bytes() == 4000);
  require_one_line_naming(load_error(utf8_options_for(raw.path)), raw.path, "NUL byte at offset 2000");

  // The check reads the whole file, not a prefix: bad bytes far past the first MiB, and a
  // character cut off by the end of the file, are found.
  const size_t mib = size_t(1) << 20;
  std::string large = random_text(3 * mib, 10);
  large[3 * mib - 10] = static_cast<char>(0xFF);
  TempFile late("utf8_late", large);
  CHECK_NOTHROW(TextDataset(options_for(late.path)));
  require_one_line_naming(load_error(utf8_options_for(late.path)), late.path,
                          "bad sequence starting with byte 0xFF at offset " + std::to_string(3 * mib - 10));
  TempFile cut("utf8_cut", random_text(4000, 13) + "\xE2\x82");
  require_one_line_naming(load_error(utf8_options_for(cut.path)), cut.path,
                          "bad sequence starting with byte 0xE2 at offset 4000");
}

TEST_CASE("refilling a batch reuses its buffers without allocating", "[data][text]") {
  TempFile file("refill", random_text(4000, 12));
  TextDataset dataset(options_for(file.path));
  Batch batch = dataset.make_batch(6);
  CHECK(batch.labels.empty());
  CHECK(batch.key_padding.empty());
  CHECK(batch.gold_head.empty());
  dataset.fill_batch(Split::train, 0, batch);
  const int32_t* tokens = batch.tokens.data();
  const int32_t* targets = batch.targets.data();
  const size_t tokens_capacity = batch.tokens.capacity(), targets_capacity = batch.targets.capacity();
  for (int64_t index = 0; index < 50; ++index)
    for (Split split : kSplits) dataset.fill_batch(split, index, batch);
  CHECK(batch.tokens.data() == tokens);
  CHECK(batch.targets.data() == targets);
  CHECK(batch.tokens.capacity() == tokens_capacity);
  CHECK(batch.targets.capacity() == targets_capacity);
  CHECK(batch.tokens.size() == size_t(6 * 16));

  Batch wrong(6, 8);
  REQUIRE_THROWS_WITH(dataset.fill_batch(Split::train, 0, wrong),
                      Catch::Contains("batch has seq_len=8 but the dataset has seq_len=16"));
}

TEST_CASE("bits per byte is nats per token over ln 2 and bytes per token", "[data][text]") {
  CHECK(bits_per_byte(std::log(2.0), 1.0) == Approx(1.0));
  CHECK(bits_per_byte(std::log(256.0), 1.0) == Approx(8.0));  // a uniform byte model
  CHECK(bits_per_byte(std::log(2.0), 4.0) == Approx(0.25));
}

TEST_CASE("the Bible export writes the whole KJV, one verse per line, without verse labels", "[data][text][bible]") {
  if (std::system("command -v bible > /dev/null 2>&1") != 0) {
    SKIP_FOR_MISSING_PACKAGE(
        "the `bible` program is not installed (apt-get install bible-kjv): Bible export not tested");
    return;
  }
  TempPath dir("bible");
  const std::string cache = (fs::path(dir.path) / "cache" / "bible-kjv.txt").string();
  REQUIRE(ensure_bible_corpus(cache) == cache);
  REQUIRE(fs::file_size(cache) > 4'000'000);
  std::vector<std::string> lines;
  {
    std::ifstream in(cache);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  REQUIRE(lines.size() == 31102);
  CHECK(lines.front() == "In the beginning God created the heaven and the earth.");
  CHECK(lines.back() == "The grace of our Lord Jesus Christ be with you all. Amen.");
  const std::regex label("^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ ");
  int64_t labelled = 0;
  for (const std::string& line : lines) labelled += std::regex_search(line, label);
  CHECK(labelled == 0);
  CHECK(std::distance(fs::directory_iterator(fs::path(cache).parent_path()), fs::directory_iterator()) == 1);

  // A second call finds the cache and leaves it alone.
  const auto written = fs::last_write_time(cache);
  REQUIRE(ensure_bible_corpus(cache) == cache);
  CHECK(fs::last_write_time(cache) == written);

  // data.path = "bible" resolves to the cache.
  TextOptions options = options_for(kBibleAlias, 256);
  options.bible_cache = cache;
  TextDataset dataset(options);
  CHECK(dataset.path() == cache);
  CHECK(dataset.size_bytes() == static_cast<int64_t>(fs::file_size(cache)));
  CHECK(dataset.eval_batches(Split::val, 32) > 0);
}

TEST_CASE("\"bible\" and the old default path name one export in the user cache, not the working directory",
          "[data][text][bible]") {
  if (std::system("command -v bible > /dev/null 2>&1") != 0) {
    SKIP_FOR_MISSING_PACKAGE(
        "the `bible` program is not installed (apt-get install bible-kjv): Bible export not tested");
    return;
  }
  TempPath dir("bible_user");
  const fs::path cache_home = fs::path(dir.path) / "cache", work = fs::path(dir.path) / "work";
  fs::create_directories(work);
  test::ScopedEnv xdg("XDG_CACHE_HOME", cache_home.c_str());
  const std::string expected = (cache_home / "headlab" / "bible-kjv.txt").string();
  CHECK(bible_cache_path() == expected);
  struct InFolder {  // the working directory, restored however the test ends
    fs::path old = fs::current_path();
    explicit InFolder(const fs::path& dir) { fs::current_path(dir); }
    ~InFolder() { fs::current_path(old); }
  } in_work(work);
  for (const std::string& path : {std::string(kBibleAlias), std::string(kOldBibleCachePath),
                                  std::string("./datasets/cache/bible-kjv.txt"), expected}) {
    INFO("data.path = " << path);
    TextDataset dataset(options_for(path, 256));
    CHECK(dataset.path() == expected);
  }
  CHECK(fs::is_empty(work));
  CHECK(std::distance(fs::directory_iterator(cache_home / "headlab"), fs::directory_iterator()) == 1);
}

namespace {

// What ensure_bible_corpus(cache) throws with PATH set to `path` (restored afterwards), or "".
std::string bible_export_error(const std::string& cache, const std::string& path) {
  test::ScopedEnv env("PATH", path.c_str());
  try {
    ensure_bible_corpus(cache);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("without the bible program the export is one line saying how to install it", "[data][text][bible]") {
  TempPath dir("nobible");
  const std::string cache = (fs::path(dir.path) / "bible-kjv.txt").string();
  // PATH: a directory that holds no `bible`.
  require_one_line_naming(bible_export_error(cache, dir.path), cache, "apt-get install bible-kjv");
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("a bible program that fails part way leaves no export and says so in one line", "[data][text][bible]") {
  // A stand-in `bible` that prints two labelled verses and exits 1.
  TempPath dir("badbible");
  const fs::path fake = fs::path(dir.path) / "bible";
  fs::create_directories(dir.path);
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\nprintf 'Genesis 1:1 In the beginning\\nGenesis 1:2 And the earth\\n'\nexit 1\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  const std::string cache = (fs::path(dir.path) / "cache" / "bible-kjv.txt").string();
  const char* path = std::getenv("PATH");
  std::string with_fake = dir.path;  // in steps: GCC 12 warns falsely on a + chain
  with_fake += ':';
  with_fake += path ? path : "";
  require_one_line_naming(bible_export_error(cache, with_fake), cache, "failed (exit status 1)");
  CHECK_FALSE(fs::exists(cache));
  CHECK(fs::is_empty(fs::path(cache).parent_path()));  // no temp file left behind
}

TEST_CASE("repair_utf8 keeps valid UTF-8 and makes each byte it cannot read U+FFFD", "[data][text]") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(repair_utf8("") == "");
  CHECK(repair_utf8("luz, agua y tierra \xC3\xB1 \xF0\x9F\x98\x80") == "luz, agua y tierra \xC3\xB1 \xF0\x9F\x98\x80");
  CHECK(repair_utf8("a\xFF"
                    "b") == "a" + fffd + "b");
  CHECK(repair_utf8("ni\xC3") == "ni" + fffd);               // stopped inside a character
  CHECK(repair_utf8("\xED\xA0\x80") == fffd + fffd + fffd);  // a surrogate: every byte refused
  CHECK(first_invalid_utf8(repair_utf8("\x80\xC0\xAF\xF5 x\xE2\x82")) == -1);
}
