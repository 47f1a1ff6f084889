// HDF5 plumbing the checkpoint writer and reader share (internal to src/io): errors as one line,
// an owning handle, and the mapping between ArrayDType and HDF5 types.
//   hdf5::silence_hdf5();  hdf5::Hid file(H5Fopen(...), H5Fclose);  hdf5::expect(file.ok(), path);
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "headlab/io/checkpoint.h"

namespace headlab::hdf5 {

// The container's own root attributes, written by commit() and checked by the reader.
inline constexpr char kKindKey[] = "headlab_kind";
inline constexpr char kVersionKey[] = "headlab_format_version";

// The 8 bytes every HDF5 file starts with (at offset 0 when there is no user block).
inline constexpr unsigned char kFileSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// Bob Jenkins' lookup3 hashlittle(), the checksum HDF5 puts on its metadata.
uint32_t lookup3(const unsigned char* k, size_t length);

// HDF5 prints its error stack to stderr by default; we turn failures into headlab::Error instead.
void silence_hdf5();

// One line from the current HDF5 error stack: the OS error if a system call failed ("File too
// large"), else the innermost description ("truncated file: eof = ...").
std::string hdf5_cause();

// Throws Error("what: <HDF5 cause>") unless `ok`; the cause is read before anything else runs.
void expect(bool ok, const std::string& what);

// Owns one HDF5 identifier.
class Hid {
 public:
  Hid(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Hid(Hid&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Hid(const Hid&) = delete;
  ~Hid() { close(); }
  operator hid_t() const { return id_; }
  bool ok() const { return id_ >= 0; }
  herr_t close() { return id_ >= 0 ? close_(std::exchange(id_, -1)) : 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

struct TypeInfo {
  hid_t file_type, mem_type;
  size_t size;
};
TypeInfo type_info(ArrayDType dtype);
ArrayDType classify(hid_t type);  // ArrayDType::unsupported for anything else

// The ArrayDType of a CheckpointArrayElement.
template <typename T>
constexpr ArrayDType dtype_of() {
  if constexpr (std::is_same_v<T, double>) return ArrayDType::float64;
  if constexpr (std::is_same_v<T, int64_t>) return ArrayDType::int64;
  if constexpr (std::is_same_v<T, uint64_t>) return ArrayDType::uint64;
  return ArrayDType::uint8;
}

}  // namespace headlab::hdf5
