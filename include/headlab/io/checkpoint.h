// HDF5 checkpoint files: a generic container of named arrays plus root attributes, the format of
// every .h5 file headlab writes: training checkpoints, heads.h5, attention dumps (io/file_kind.h).
// The caller decides what goes in; this layer only writes, validates and reads it
// (docs/checkpoint-format.md).
// Layout: dataset "model/blocks/0/attn/qkv/weight" lives in nested groups model/blocks/0/attn/qkv;
// arrays are row-major, little-endian, float32 (tensors) or float64/int64/uint64/uint8; the root
// group carries headlab_kind (the FileKind's name), headlab_format_version = 1, the build's
// provenance (io/provenance.h: headlab_version, headlab_commit, ...) and the caller's attributes.
// Memory: the writer copies every array when it is added (the caller's buffers may change at once)
// and commit() builds the file in memory before one write, so it briefly holds about three copies;
// the reader reads into tensors the caller owns. Use from one thread (HDF5 I/O stays on one thread).
//   CheckpointWriter w(FileKind::checkpoint); w.add("model/wte/weight", wte); w.commit(path);
//   CheckpointReader r(path); r.require_kind(FileKind::checkpoint); r.read_into("model/wte/weight", wte);
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "headlab/io/file_kind.h"
#include "headlab/tensor/tensor.h"

namespace headlab {

inline constexpr int64_t kCheckpointFormatVersion = 1;

enum class ArrayDType : uint8_t { float32, float64, int64, uint64, uint8, unsupported };
const char* dtype_name(ArrayDType dtype);  // "float32", ...

// Element types add_array / read_array accept (tensors of float go through add / read_into).
template <typename T>
concept CheckpointArrayElement = std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, uint64_t> || std::is_same_v<T, uint8_t>;

class CheckpointWriter {
 public:
  // `kind` says what the file holds (headlab_kind). Only tests and format-migration tools pass a
  // version other than the current one.
  explicit CheckpointWriter(FileKind kind, int64_t format_version = kCheckpointFormatVersion)
      : kind_(kind), format_version_(format_version) {}

  // Copies `tensor` (any strides) as a contiguous float32 dataset with its shape.
  void add(const std::string& name, const Tensor<float>& tensor);
  // Copies shape.numel() elements from `data` (contiguous, row-major).
  template <CheckpointArrayElement T>
  void add_array(const std::string& name, const T* data, const Shape& shape);
  template <CheckpointArrayElement T>
  void add_array(const std::string& name, const std::vector<T>& values) {
    add_array(name, values.data(), Shape{static_cast<int64_t>(values.size())});
  }

  // Root attributes. headlab_kind and headlab_format_version are written by commit().
  void set_string_attr(const std::string& key, const std::string& value);
  void set_int_attr(const std::string& key, int64_t value);
  void set_double_attr(const std::string& key, double value);

  // Writes everything to `path` atomically (PATH.tmp.<pid>, fsync, rename, fsync of the directory;
  // the directory must exist). On failure throws headlab::Error naming the path and the cause; a
  // previous file at `path` is left untouched and the temp file is removed. May be called again.
  void commit(const std::string& path) const;

 private:
  struct Array {
    std::string name;
    ArrayDType dtype;
    Shape shape;
    std::vector<unsigned char> bytes;
  };
  struct Attr {
    std::string key;
    enum class Kind : uint8_t { string, int64, float64 } kind;
    std::string string_value;
    int64_t int_value = 0;
    double double_value = 0;
  };
  Array& add_entry(const std::string& name, ArrayDType dtype, const Shape& shape);
  void set_attr(Attr attr);
  std::vector<unsigned char> file_image(const std::string& name) const;

  FileKind kind_;
  int64_t format_version_;
  std::vector<Array> arrays_;
  std::vector<Attr> attrs_;
};

class CheckpointReader {
 public:
  // Opens and validates `path` (a headlab file of any known kind and the current format version);
  // indexes every dataset's name, shape and dtype. A file that crashes the HDF5 library (corrupt
  // metadata HDF5 does not check) is one Error: its metadata and root attributes are read in a
  // forked child first (docs/reliability.md).
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t format_version() const { return format_version_; }
  FileKind kind() const { return kind_; }
  // Throws "PATH: a heads file (written by headlab analyze), not a checkpoint" unless kind() is `want`.
  void require_kind(FileKind want) const;

  std::vector<std::string> names() const;  // every dataset, sorted
  bool has(const std::string& name) const;
  Shape shape(const std::string& name) const;
  ArrayDType dtype(const std::string& name) const;

  // Reads a float32 dataset into `out` (any strides); its shape must match exactly.
  void read_into(const std::string& name, const Tensor<float>& out) const;
  template <CheckpointArrayElement T>
  std::vector<T> read_array(const std::string& name) const;  // row-major, dtype must match

  std::vector<std::string> attr_names() const;
  bool has_attr(const std::string& key) const;
  std::string string_attr(const std::string& key) const;
  int64_t int_attr(const std::string& key) const;
  double double_attr(const std::string& key) const;

 private:
  struct Entry {
    std::string name;
    Shape shape;
    ArrayDType dtype;
  };
  void open_file();       // H5Fopen, the kind and version checks, the dataset index
  void probe_in_child();  // open_file() and every attribute read in a forked child first
  const Entry* find(const std::string& name) const;
  const Entry& entry(const std::string& name) const;
  void read_raw(const Entry& entry, ArrayDType want, void* out) const;

  std::string path_;
  int64_t file_ = -1;  // hid_t
  int64_t format_version_ = 0;
  FileKind kind_ = FileKind::checkpoint;
  std::vector<Entry> entries_;  // sorted by name
};

}  // namespace headlab
