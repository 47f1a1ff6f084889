// CheckpointWriter: the arrays and attributes a caller adds, built into an HDF5 file in memory
// and committed to disk atomically (docs/checkpoint-format.md, "Writing and files on disk").
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "hdf5_util.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/provenance.h"

namespace headlab {

namespace fs = std::filesystem;
using namespace hdf5;

namespace {

// Module paths: components of [A-Za-z0-9_.-], separated by single slashes, never "." or "..".
bool valid_name(const std::string& name) {
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string part = name.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
    if (end == name.size()) return true;
    begin = end + 1;
  }
}

bool is_group_of(const std::string& group, const std::string& name) {
  return name.size() > group.size() && name.compare(0, group.size(), group) == 0 && name[group.size()] == '/';
}

}  // namespace

CheckpointWriter::Array& CheckpointWriter::add_entry(const std::string& name, ArrayDType dtype, const Shape& shape) {
  HEADLAB_CHECK(valid_name(name), "checkpoint: invalid dataset name '"
                                      << name << "' (expected a module path like model/blocks/0/attn/qkv/weight)");
  for (const Array& a : arrays_) {
    HEADLAB_CHECK(a.name != name, "checkpoint: dataset " << name << " added twice");
    HEADLAB_CHECK(!is_group_of(a.name, name) && !is_group_of(name, a.name),
                  "checkpoint: " << a.name << " and " << name << " cannot both exist (one is a group of the other)");
  }
  arrays_.push_back({name, dtype, shape, std::vector<unsigned char>(shape.numel() * type_info(dtype).size)});
  return arrays_.back();
}

void CheckpointWriter::add(const std::string& name, const Tensor<float>& tensor) {
  HEADLAB_CHECK(!tensor.empty() || tensor.numel() == 0, "checkpoint: " << name << " is an empty tensor view");
  Array& a = add_entry(name, ArrayDType::float32, tensor.shape());
  Tensor<float>(reinterpret_cast<float*>(a.bytes.data()), tensor.shape()).copy_from(tensor);
}

template <CheckpointArrayElement T>
void CheckpointWriter::add_array(const std::string& name, const T* data, const Shape& shape) {
  HEADLAB_CHECK(data || shape.numel() == 0, "checkpoint: " << name << " has no data");
  Array& a = add_entry(name, dtype_of<T>(), shape);
  if (!a.bytes.empty()) std::memcpy(a.bytes.data(), data, a.bytes.size());
}
template void CheckpointWriter::add_array<double>(const std::string&, const double*, const Shape&);
template void CheckpointWriter::add_array<int64_t>(const std::string&, const int64_t*, const Shape&);
template void CheckpointWriter::add_array<uint64_t>(const std::string&, const uint64_t*, const Shape&);
template void CheckpointWriter::add_array<uint8_t>(const std::string&, const uint8_t*, const Shape&);

void CheckpointWriter::set_attr(Attr attr) {
  HEADLAB_CHECK(!attr.key.empty() && attr.key.find('\0') == std::string::npos,
                "checkpoint: invalid attribute name '" << attr.key << "'");
  HEADLAB_CHECK(attr.key != kKindKey && attr.key != kVersionKey,
                "checkpoint: attribute " << attr.key << " is reserved (commit writes it)");
  auto same_key = [&](const Attr& existing) { return existing.key == attr.key; };
  auto it = std::find_if(attrs_.begin(), attrs_.end(), same_key);
  if (it != attrs_.end())
    *it = std::move(attr);  // setting a key again replaces its value
  else
    attrs_.push_back(std::move(attr));
}
void CheckpointWriter::set_string_attr(const std::string& key, const std::string& value) {
  set_attr({key, Attr::Kind::string, value});
}
void CheckpointWriter::set_int_attr(const std::string& key, int64_t value) {
  set_attr({key, Attr::Kind::int64, {}, value});
}
void CheckpointWriter::set_double_attr(const std::string& key, double value) {
  set_attr({key, Attr::Kind::float64, {}, 0, value});
}

// The file is built in memory (HDF5's core driver) and written to disk by commit() with plain
// POSIX calls: when HDF5's own writes fail (full disk), H5Fclose fails too and leaves the file
// open inside the library, which crashes at exit. In memory nothing can fail that way.
std::vector<unsigned char> CheckpointWriter::file_image(const std::string& name) const {
  size_t payload = 64 << 10;  // grow the image once: data plus room for metadata
  for (const Array& array : arrays_) payload += array.bytes.size() + 1024;
  // The 1.10 object formats checksum all metadata and index a one-chunk dataset without a B-tree
  // (about 1 KiB per dataset instead of 3); any HDF5 >= 1.10 (h5py >= 2.10) reads them. No
  // timestamps, so the same content gives the same bytes.
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose), fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  Hid gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  expect(fapl.ok() && fcpl.ok() && gcpl.ok() && H5Pset_fapl_core(fapl, payload, false) >= 0 &&
             H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0 &&
             H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0 && H5Pset_obj_track_times(fcpl, false) >= 0 &&
             H5Pset_obj_track_times(gcpl, false) >= 0,
         "setting up HDF5 properties");
  Hid file(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, fcpl, fapl), H5Fclose);
  expect(file.ok(), "creating the HDF5 file in memory");
  {
    Hid root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose), scalar(H5Screate(H5S_SCALAR), H5Sclose);
    Hid string_type(H5Tcopy(H5T_C_S1), H5Tclose);
    expect(root.ok() && scalar.ok() && string_type.ok() && H5Tset_size(string_type, H5T_VARIABLE) >= 0 &&
               H5Tset_cset(string_type, H5T_CSET_UTF8) >= 0,
           "opening the root group");
    std::vector<Attr> attrs = {{kKindKey, Attr::Kind::string, file_kind_name(kind_)},
                               {kVersionKey, Attr::Kind::int64, {}, format_version_}};
    // Every file says which build wrote it, unless the caller set a field itself (a tool
    // rewriting a file keeps the original's).
    for (const ProvenanceField& f : provenance())
      if (std::none_of(attrs_.begin(), attrs_.end(), [&](const Attr& a) { return a.key == f.key; }))
        attrs.push_back({f.key, Attr::Kind::string, f.value});
    attrs.insert(attrs.end(), attrs_.begin(), attrs_.end());
    for (const Attr& attr : attrs) {
      const hid_t type = attr.kind == Attr::Kind::string  ? hid_t(string_type)
                         : attr.kind == Attr::Kind::int64 ? H5T_STD_I64LE
                                                          : H5T_IEEE_F64LE;
      Hid a(H5Acreate2(root, attr.key.c_str(), type, scalar, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      const char* text = attr.string_value.c_str();
      const herr_t rc = attr.kind == Attr::Kind::string  ? H5Awrite(a, string_type, &text)
                        : attr.kind == Attr::Kind::int64 ? H5Awrite(a, H5T_NATIVE_INT64, &attr.int_value)
                                                         : H5Awrite(a, H5T_NATIVE_DOUBLE, &attr.double_value);
      expect(a.ok() && rc >= 0 && a.close() >= 0, "writing attribute " + attr.key);
    }
  }
  std::set<std::string> groups;
  for (const Array& array : arrays_) {
    for (size_t slash = array.name.find('/'); slash != std::string::npos; slash = array.name.find('/', slash + 1)) {
      const std::string group = array.name.substr(0, slash);
      if (!groups.insert(group).second) continue;
      Hid g(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose);
      expect(g.ok() && g.close() >= 0, "creating group " + group);
    }
    const TypeInfo info = type_info(array.dtype);
    const Shape& shape = array.shape;
    hsize_t dims[kMaxRank];
    for (int d = 0; d < shape.rank; ++d) dims[d] = static_cast<hsize_t>(shape[d]);
    Hid space(shape.rank ? H5Screate_simple(shape.rank, dims, nullptr) : H5Screate(H5S_SCALAR), H5Sclose);
    Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    expect(space.ok() && dcpl.ok() && H5Pset_obj_track_times(dcpl, false) >= 0, "describing " + array.name);
    // One chunk holding the whole array, with a Fletcher-32 checksum: a flipped bit in the
    // weights becomes a read error instead of a silently different model.
    if (shape.rank > 0 && shape.numel() > 0 && array.bytes.size() < (size_t(1) << 31))
      expect(H5Pset_chunk(dcpl, shape.rank, dims) >= 0 && H5Pset_fletcher32(dcpl) >= 0, "describing " + array.name);
    Hid dataset(H5Dcreate2(file, array.name.c_str(), info.file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
    expect(dataset.ok(), "creating dataset " + array.name);
    if (!array.bytes.empty())
      expect(H5Dwrite(dataset, info.mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, array.bytes.data()) >= 0,
             "writing " + array.name);
    expect(dataset.close() >= 0, "writing " + array.name);
  }
  expect(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, "flushing");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  expect(size > 0, "sizing the file image");
  std::vector<unsigned char> image(static_cast<size_t>(size));
  expect(H5Fget_file_image(file, image.data(), image.size()) == size, "copying the file image");
  expect(file.close() >= 0, "closing the in-memory file");
  // H5Fget_file_image (1.10.8) zeroes the superblock's "open for writing" flags in the copy but
  // keeps the checksum computed with them set. Superblock v2/v3 (format spec, fixed): signature
  // (8), version, offset size, length size, flags, 4 addresses of 8 bytes, lookup3 checksum.
  HEADLAB_CHECK(image.size() >= 48 && std::memcmp(image.data(), kFileSignature, 8) == 0 &&
                    (image[8] == 2 || image[8] == 3) && image[9] == 8 && image[10] == 8,
                "unexpected HDF5 superblock (version " << int(image.size() > 8 ? image[8] : 0) << ")");
  image[11] = 0;
  const uint32_t checksum = lookup3(image.data(), 44);
  for (int i = 0; i < 4; ++i) image[44 + i] = static_cast<unsigned char>(checksum >> (8 * i));
  return image;
}

void CheckpointWriter::commit(const std::string& path) const {
  silence_hdf5();
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::vector<unsigned char> image;
  try {
    image = file_image(temp);
  } catch (const Error& e) {
    throw Error("cannot write checkpoint " + path + ": " + e.what());
  }
  // Temp file, fsync, rename over `path`, fsync the directory. Any failure removes the temp file.
  std::string failure;
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write checkpoint " + path + ": creating " + temp + ": " + std::strerror(errno));
  for (size_t done = 0; done < image.size() && failure.empty();) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      failure = "writing " + temp + ": " + (n < 0 ? std::strerror(errno) : "no progress");
    else
      done += static_cast<size_t>(n);
  }
  if (failure.empty() && ::fsync(fd) != 0) failure = "fsync of " + temp + ": " + std::strerror(errno);
  if (::close(fd) != 0 && failure.empty()) failure = "closing " + temp + ": " + std::strerror(errno);
  if (failure.empty() && ::rename(temp.c_str(), path.c_str()) != 0)
    failure = "renaming " + temp + ": " + std::strerror(errno);
  if (!failure.empty()) {
    ::unlink(temp.c_str());
    throw Error("cannot write checkpoint " + path + ": " + failure);
  }
  const std::string dir = fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = dir_fd < 0 ? -1 : ::fsync(dir_fd), err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  HEADLAB_CHECK(rc == 0, "checkpoint " << path << " was written, but syncing directory " << dir
                                       << " failed, so it may not survive a crash: " << std::strerror(err));
}

}  // namespace headlab
