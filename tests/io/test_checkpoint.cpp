#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "headlab/io/checkpoint.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "support/hdf5_edit.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "headlab_ckpt_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool has_temp_file(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// Values whose bits a lossy path would change: -0, a NaN with a payload, a denormal, infinity.
std::vector<float> awkward_floats(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s)) * 1e-9f;
  }
  const uint32_t specials[] = {0x80000000u, 0x7fc01234u, 0x00000001u, 0x7f800000u};
  for (int i = 0; i < 4 && i < n; ++i) std::memcpy(&v[i], &specials[i], 4);
  return v;
}

// A small checkpoint shaped like a model's: a few nested weights, typed arrays and attributes.
std::string write_sample(const std::string& path) {
  std::vector<float> qkv = awkward_floats(12 * 4, 1), wte = awkward_floats(10 * 4, 2);
  CheckpointWriter writer(FileKind::checkpoint);
  writer.add("model/blocks/0/attn/qkv/weight", Tensor<float>(qkv.data(), {12, 4}));
  writer.add("model/wte/weight", Tensor<float>(wte.data(), {10, 4}));
  writer.add_array("optim/step", std::vector<int64_t>{42});
  writer.add_array("rng/state", std::vector<uint64_t>{1, 2, 3, 4});
  writer.set_string_attr("config", "d_model = 4");
  writer.set_int_attr("step", 42);
  writer.commit(path);
  return read_bytes(path);
}

}  // namespace

TEST_CASE("checkpoint round trip is bit-exact for tensors, strided views, arrays and attributes", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  std::vector<float> w = awkward_floats(3 * 5, 7), base = awkward_floats(4 * 6, 8);
  Tensor<float> weight(w.data(), {3, 5});
  // A transposed view of a [4, 6] buffer: shape [6, 4], strides [1, 6].
  Tensor<float> strided = Tensor<float>(base.data(), {4, 6}).transpose(0, 1);
  REQUIRE_FALSE(strided.is_contiguous());
  const double nan_payload = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> f64 = {1.0 / 3.0, -0.0, nan_payload, 1e-310};
  const std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()};
  const std::vector<uint64_t> u64 = {std::numeric_limits<uint64_t>::max(), 0x9e3779b97f4a7c15ull};
  const uint8_t mask[2 * 3] = {1, 0, 1, 1, 1, 0};  // head mask [n_layers=2, n_heads=3]

  CheckpointWriter writer(FileKind::checkpoint);
  writer.add("model/blocks/0/attn/qkv/weight", weight);
  writer.add("model/blocks/0/attn/proj/weight", strided);
  writer.add_array("optim/adamw/state", f64);
  writer.add_array("optim/step", i64);
  writer.add_array("rng/state", u64);
  writer.add_array("analysis/head_mask", mask, {2, 3});
  writer.set_string_attr("run_name", "tiny-gpt \xc3\xa9t\xc3\xa9");
  writer.set_string_attr("empty", "");
  writer.set_int_attr("step", -7);
  writer.set_double_attr("lr", 3e-4);
  writer.set_double_attr("lr", 6e-4);  // a second set replaces the first
  writer.commit(path);

  CheckpointReader reader(path);
  CHECK(reader.format_version() == 1);
  CHECK(reader.names() == std::vector<std::string>{"analysis/head_mask", "model/blocks/0/attn/proj/weight",
                                                   "model/blocks/0/attn/qkv/weight", "optim/adamw/state", "optim/step",
                                                   "rng/state"});
  CHECK(reader.has("model/blocks/0/attn/qkv/weight"));
  CHECK_FALSE(reader.has("model/blocks/0/attn"));  // a group, not a dataset
  CHECK(reader.shape("model/blocks/0/attn/proj/weight") == Shape{6, 4});
  CHECK(reader.shape("analysis/head_mask") == Shape{2, 3});
  CHECK(reader.dtype("rng/state") == ArrayDType::uint64);

  std::vector<float> got(15);
  reader.read_into("model/blocks/0/attn/qkv/weight", Tensor<float>(got.data(), {3, 5}));
  for (int i = 0; i < 15; ++i) CHECK(bits(got[i]) == bits(w[i]));
  std::vector<float> got_t(24);
  Tensor<float> contiguous(got_t.data(), {6, 4});
  reader.read_into("model/blocks/0/attn/proj/weight", contiguous);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(bits(contiguous(i, j)) == bits(strided(i, j)));
  // Reading into a strided destination view lands each element in its place.
  std::vector<float> back(24, 0.f);
  Tensor<float> back_view = Tensor<float>(back.data(), {4, 6}).transpose(0, 1);
  reader.read_into("model/blocks/0/attn/proj/weight", back_view);
  for (int i = 0; i < 24; ++i) CHECK(bits(back[i]) == bits(base[i]));

  const std::vector<double> f64_back = reader.read_array<double>("optim/adamw/state");
  REQUIRE(f64_back.size() == f64.size());
  CHECK(std::memcmp(f64_back.data(), f64.data(), sizeof(double) * f64.size()) == 0);
  CHECK(reader.read_array<int64_t>("optim/step") == i64);
  CHECK(reader.read_array<uint64_t>("rng/state") == u64);
  CHECK(reader.read_array<uint8_t>("analysis/head_mask") == std::vector<uint8_t>(mask, mask + 6));

  CHECK(reader.attr_names() == std::vector<std::string>{"blis_kernels", "empty", "headlab_build_type", "headlab_commit",
                                                        "headlab_format_version", "headlab_kind", "headlab_version",
                                                        "lr", "run_name", "step"});
  CHECK(reader.string_attr("headlab_kind") == "checkpoint");
  CHECK(reader.string_attr("run_name") == "tiny-gpt \xc3\xa9t\xc3\xa9");
  CHECK(reader.string_attr("empty").empty());
  CHECK(reader.int_attr("step") == -7);
  CHECK(reader.double_attr("lr") == 6e-4);
}

TEST_CASE("every checkpoint records the build that wrote it, and files without the record still read",
          "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5", own = dir / "own.h5";
  CheckpointWriter writer(FileKind::checkpoint);
  writer.set_int_attr("step", 3);
  writer.commit(path);
  const std::vector<ProvenanceField> recorded = recorded_provenance(CheckpointReader(path));
  REQUIRE(recorded.size() == provenance().size());
  for (size_t i = 0; i < recorded.size(); ++i) {
    CHECK(std::string(recorded[i].key) == provenance()[i].key);
    CHECK(recorded[i].value == provenance()[i].value);
    CHECK_FALSE(recorded[i].value.empty());
  }
  CHECK(provenance_value("blis_kernels") == blis_kernel_name());

  // A tool rewriting a file keeps the original's record.
  writer.set_string_attr("headlab_commit", "0123abc");
  writer.commit(own);
  CHECK(CheckpointReader(own).string_attr("headlab_commit") == "0123abc");

  // Files from before the record existed: no fields, and everything else reads as before.
  test::delete_root_attrs(path, {"headlab_version", "headlab_commit", "headlab_build_type", "blis_kernels"});
  CheckpointReader old(path);
  CHECK(recorded_provenance(old).empty());
  CHECK(old.int_attr("step") == 3);
}

TEST_CASE("checkpoint stores scalars and empty arrays with their shapes", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  const int64_t step = 1234;
  float nothing[1];
  CheckpointWriter writer(FileKind::checkpoint);
  writer.add_array("optim/step", &step, Shape{});  // rank 0: an HDF5 scalar
  writer.add("model/empty", Tensor<float>(nothing, {0, 4}));
  writer.add_array("analysis/none", std::vector<uint8_t>{});
  writer.commit(path);
  CheckpointReader reader(path);
  CHECK(reader.shape("optim/step").rank == 0);
  CHECK(reader.read_array<int64_t>("optim/step") == std::vector<int64_t>{1234});
  CHECK(reader.shape("model/empty") == Shape{0, 4});
  reader.read_into("model/empty", Tensor<float>(nothing, {0, 4}));
  CHECK(reader.read_array<uint8_t>("analysis/none").empty());
}

TEST_CASE("checkpoint writing the same content twice gives identical bytes", "[io][checkpoint]") {
  TempDir dir;
  CHECK(write_sample(dir / "a.h5") == write_sample(dir / "b.h5"));
}

TEST_CASE("checkpoint reader names a missing file", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "nope.h5";
  REQUIRE_THROWS_WITH(CheckpointReader(path), "checkpoint not found: " + path);
}

TEST_CASE("checkpoint reader rejects a file that is not HDF5", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "notes.h5";
  write_bytes(path, "step,loss\n1,4.2\n2,3.9\n");
  REQUIRE_THROWS_WITH(CheckpointReader(path), path + ": not an HDF5 file");
  write_bytes(path, "");
  REQUIRE_THROWS_WITH(CheckpointReader(path), path + ": empty file (corrupt or truncated)");
}

TEST_CASE("a checkpoint cut short is named as such from its superblock, before HDF5 opens it", "[io][checkpoint]") {
  TempDir dir;
  const std::string bytes = write_sample(dir / "full.h5");
  const std::string path = dir / "cut.h5";
  for (const size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t(48)}) {
    write_bytes(path, bytes.substr(0, keep));
    REQUIRE_THROWS_WITH(CheckpointReader(path),
                        path + ": corrupt or truncated HDF5 file (cut short: " + std::to_string(keep) + " of the " +
                            std::to_string(bytes.size()) + " bytes its superblock records)");
  }
}

TEST_CASE("checkpoint truncated at any offset gives an Error, never a crash", "[io][checkpoint]") {
  TempDir dir;
  const std::string bytes = write_sample(dir / "full.h5");
  const std::string path = dir / "cut.h5";
  write_bytes(path, bytes);
  // HDF5 must not print its error stack: stderr goes to a file while the reader fails.
  const std::string stderr_path = dir / "stderr.txt";
  const int saved_stderr = ::dup(2), captured = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE((saved_stderr >= 0 && captured >= 0 && ::dup2(captured, 2) == 2));
  // Every size from the full length down to 0, cut in place with truncate(2) (fast on ext4).
  int failures = 0;
  for (int64_t size = static_cast<int64_t>(bytes.size()) - 1; size >= 0; --size) {
    REQUIRE(::truncate(path.c_str(), size) == 0);
    try {
      CheckpointReader reader(path);
      FAIL("opened a checkpoint truncated to " << size << " of " << bytes.size() << " bytes");
    } catch (const Error& e) {
      const std::string message = e.what();
      const bool clear =
          message.starts_with(path + ": ") && message.find('\n') == std::string::npos &&
          (message.find("truncated") != std::string::npos || message.find("not an HDF5 file") != std::string::npos);
      if (!clear && ++failures <= 3) CHECK(message == "(one line naming the path and the truncation)");
    }
  }
  ::dup2(saved_stderr, 2);
  ::close(saved_stderr);
  ::close(captured);
  CHECK(failures == 0);
  CHECK(read_bytes(stderr_path).empty());
}

// Found by tests/fuzz/fuzz_checkpoint: HDF5 1.10 copied a variable-length string attribute from
// its global heap by the object size written in the file, past the heap's buffer.
TEST_CASE("checkpoint whose global heap object claims more bytes than its heap is one Error", "[io][checkpoint]") {
  TempDir dir;
  std::string bytes = write_sample(dir / "full.h5");
  const size_t heap = bytes.find(std::string("GCOL\1\0\0\0", 8));
  REQUIRE(heap != std::string::npos);
  // The first object's size field (after the 16-byte collection header and 8 bytes of index,
  // reference count and padding): make it 2^40.
  const std::string huge("\0\0\0\0\0\1\0\0", 8);
  bytes.replace(heap + 16 + 8, 8, huge);
  const std::string path = dir / "heap.h5";
  write_bytes(path, bytes);
  REQUIRE_THROWS_MATCHES(CheckpointReader(path), Error,
                         Catch::Matchers::Message(path + ": corrupt or truncated HDF5 file (the global heap at byte " +
                                                  std::to_string(heap) +
                                                  ": object 1 claims 1099511627776 bytes, "
                                                  "past the end of its heap)"));
}

// Found by tests/fuzz/fuzz_checkpoint: iterating this file's dense link storage makes HDF5 1.10
// free() a pointer it never allocated. The reader walks the metadata in a forked child first.
TEST_CASE("checkpoint that crashes the HDF5 library is one Error and this process lives", "[io][checkpoint]") {
  const std::string path = std::string(HEADLAB_SOURCE_DIR) +
                           "/tests/fuzz/corpus/fuzz_checkpoint/regression_hdf5_invalid_free_dense_links.h5";
  REQUIRE(fs::exists(path));
  REQUIRE_THROWS_MATCHES(CheckpointReader(path), Error,
                         Catch::Matchers::Predicate<Error>(
                             [&](const Error& e) {
                               const std::string m = e.what();
                               return m.starts_with(path + ": corrupt") && m.find('\n') == std::string::npos;
                             },
                             "one line: PATH: corrupt ..."));
}

TEST_CASE("checkpoint read detects a flipped bit in the weights", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  std::vector<float> w(256);
  for (int i = 0; i < 256; ++i) w[i] = 1000.0f + static_cast<float>(i);
  CheckpointWriter writer(FileKind::checkpoint);
  writer.add("model/lm_head/weight", Tensor<float>(w.data(), {16, 16}));
  writer.commit(path);
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(w.data()), 64));
  REQUIRE(at != std::string::npos);
  bytes[at + 100] ^= 0x10;
  write_bytes(path, bytes);
  CheckpointReader reader(path);  // metadata intact: opening works
  std::vector<float> got(256);
  REQUIRE_THROWS_WITH(reader.read_into("model/lm_head/weight", Tensor<float>(got.data(), {16, 16})),
                      Catch::StartsWith(path + ": cannot read model/lm_head/weight, corrupt checkpoint") &&
                          Catch::Contains("Fletcher32"));
}

TEST_CASE("checkpoint reader names the dataset and both shapes when the architecture differs", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  std::vector<float> w(384 * 128, 0.5f);
  CheckpointWriter writer(FileKind::checkpoint);
  writer.add("model/blocks/0/attn/qkv/weight", Tensor<float>(w.data(), {384, 128}));
  writer.commit(path);
  CheckpointReader reader(path);
  std::vector<float> model(256 * 128);
  REQUIRE_THROWS_WITH(reader.read_into("model/blocks/0/attn/qkv/weight", Tensor<float>(model.data(), {256, 128})),
                      path + ": model/blocks/0/attn/qkv/weight has shape [384, 128], the model expects [256, 128]");
}

TEST_CASE("checkpoint reader gives one clear line for missing or mistyped entries", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  write_sample(path);
  CheckpointReader reader(path);
  float x[4];
  REQUIRE_THROWS_WITH(reader.read_into("model/wpe/weight", Tensor<float>(x, {4})),
                      path + ": no dataset model/wpe/weight in the checkpoint");
  REQUIRE_THROWS_WITH(reader.read_array<uint64_t>("optim/step"), path + ": optim/step is int64, expected uint64");
  REQUIRE_THROWS_WITH(reader.int_attr("seed"), path + ": missing attribute seed");
  REQUIRE_THROWS_WITH(reader.int_attr("config"), path + ": attribute config is a string, not an integer");
  REQUIRE_THROWS_WITH(reader.double_attr("step"), path + ": attribute step is an integer, not a float");
}

TEST_CASE("checkpoint reader rejects an unsupported format version", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "future.h5";
  CheckpointWriter(FileKind::checkpoint, 2).commit(path);
  REQUIRE_THROWS_WITH(CheckpointReader(path), path + ": unsupported checkpoint format version 2 (this build reads 1)");
}

TEST_CASE("a file's kind round-trips, and a reader asked for another kind names both in one line", "[io][checkpoint]") {
  TempDir dir;
  for (const FileKind kind :
       {FileKind::checkpoint, FileKind::heads, FileKind::attention, FileKind::bleu_ablation, FileKind::circuits}) {
    const std::string path = dir / (std::string(file_kind_name(kind)) + ".h5");
    CheckpointWriter(kind).commit(path);
    CheckpointReader reader(path);
    CHECK(reader.kind() == kind);
    CHECK(reader.string_attr("headlab_kind") == file_kind_name(kind));
    CHECK(file_kind_from_name(file_kind_name(kind)) == kind);
    reader.require_kind(kind);
  }
  CHECK(std::string(file_kind_name(FileKind::heads)) == "heads");
  CHECK(std::string(file_kind_name(FileKind::attention)) == "attention");
  const std::string heads = dir / "heads.h5", attention = dir / "attention.h5";
  REQUIRE_THROWS_WITH(CheckpointReader(heads).require_kind(FileKind::checkpoint),
                      heads + ": a heads file (written by headlab analyze), not a checkpoint");
  REQUIRE_THROWS_WITH(
      CheckpointReader(attention).require_kind(FileKind::heads),
      attention + ": an attention dump (written by headlab analyze --dump-example or --prompt), not a heads file");
  REQUIRE_THROWS_WITH(CheckpointWriter(FileKind::heads).set_string_attr("headlab_kind", "checkpoint"),
                      Catch::Contains("is reserved"));
}

TEST_CASE("checkpoint reader refuses a kind it does not know, and a file without one", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "other.h5";
  CheckpointWriter(FileKind::checkpoint).commit(path);
  test::set_root_string_attr(path, "headlab_kind", "tokenizer");
  REQUIRE_THROWS_WITH(CheckpointReader(path), path +
                                                  ": headlab_kind is 'tokenizer', not a kind this build reads "
                                                  "(checkpoint, heads, attention, bleu_ablation, circuits)");
  test::delete_root_attrs(path, {"headlab_kind"});
  REQUIRE_THROWS_WITH(CheckpointReader(path), path + ": not a headlab file (no headlab_kind attribute)");
}

TEST_CASE("checkpoint writer rejects bad dataset and attribute names", "[io][checkpoint]") {
  CheckpointWriter writer(FileKind::checkpoint);
  float x[2] = {};
  writer.add("model/ln_f/weight", Tensor<float>(x, {2}));
  REQUIRE_THROWS_WITH(writer.add("model//bias", Tensor<float>(x, {2})), Catch::Contains("invalid dataset name"));
  REQUIRE_THROWS_WITH(writer.add("/model/x", Tensor<float>(x, {2})), Catch::Contains("invalid dataset name"));
  REQUIRE_THROWS_WITH(writer.add("model/../x", Tensor<float>(x, {2})), Catch::Contains("invalid dataset name"));
  REQUIRE_THROWS_WITH(writer.add("model/ln_f/weight", Tensor<float>(x, {2})),
                      "checkpoint: dataset model/ln_f/weight added twice");
  REQUIRE_THROWS_WITH(writer.add("model/ln_f", Tensor<float>(x, {2})), Catch::Contains("one is a group of the other"));
  REQUIRE_THROWS_WITH(writer.set_int_attr("headlab_format_version", 3), Catch::Contains("is reserved"));
}

TEST_CASE("checkpoint commit replaces an existing file and leaves no temp file", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  write_sample(path);
  CheckpointWriter writer(FileKind::checkpoint);
  writer.set_int_attr("step", 43);
  writer.commit(path);
  CheckpointReader reader(path);
  CHECK(reader.int_attr("step") == 43);
  CHECK(reader.names().empty());
  CHECK_FALSE(has_temp_file(dir.path));
}

TEST_CASE("checkpoint commit into a missing directory fails cleanly", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "no/such/dir/ckpt.h5";
  REQUIRE_THROWS_WITH(
      CheckpointWriter(FileKind::checkpoint).commit(path),
      Catch::StartsWith("cannot write checkpoint " + path + ": ") && Catch::Contains("No such file or directory"));
  CHECK_FALSE(has_temp_file(dir.path));
}

TEST_CASE("checkpoint commit that hits a full disk leaves the previous checkpoint intact", "[io][checkpoint]") {
  TempDir dir;
  const std::string path = dir / "ckpt.h5";
  const std::string before = write_sample(path);

  // The child may write at most 64 KiB per file; a 4 MiB tensor then fails with EFBIG, as a full
  // disk fails with ENOSPC. Exit codes: 0 = headlab::Error naming the path, 1 = no error,
  // 2 = an Error with the wrong message, 3 = another exception, 4 = a leaked file descriptor.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto open_fds = [] { return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()); };
    const auto fds_before = open_fds();
    int code = 1;
    try {
      std::vector<float> big(1 << 20, 1.0f);
      CheckpointWriter writer(FileKind::checkpoint);
      writer.add("model/wte/weight", Tensor<float>(big.data(), {1024, 1024}));
      writer.commit(path);
    } catch (const Error& e) {
      const std::string message = e.what();
      code = message.starts_with("cannot write checkpoint " + path + ": ") &&
                     message.find("File too large") != std::string::npos && message.find('\n') == std::string::npos
                 ? 0
                 : 2;
    } catch (...) {
      code = 3;
    }
    if (code == 0 && open_fds() != fds_before) code = 4;  // the failed commit leaked a descriptor
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_bytes(path) == before);
  CHECK_FALSE(has_temp_file(dir.path));
  CheckpointReader reader(path);
  CHECK(reader.int_attr("step") == 42);
}
