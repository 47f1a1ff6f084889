#include "headlab/io/checkpoint.h"

#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>
#include <utility>

#include "headlab/io/provenance.h"

#if defined(__SANITIZE_ADDRESS__)
#define HEADLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEADLAB_ASAN 1
#endif
#endif
#ifdef HEADLAB_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace headlab {

namespace fs = std::filesystem;
static_assert(std::is_same_v<hid_t, int64_t>, "CheckpointReader keeps its hid_t in an int64_t");

namespace {

constexpr char kKindKey[] = "headlab_kind";
constexpr char kVersionKey[] = "headlab_format_version";

// HDF5 prints its error stack to stderr by default; we turn failures into headlab::Error instead.
// In thread-safe builds the setting belongs to the calling thread's stack, hence thread_local.
void silence_hdf5() {
  thread_local bool silenced = false;
  if (!silenced) silenced = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
}

// One line from the current HDF5 error stack: the OS error if a system call failed ("File too
// large"), else the innermost description ("truncated file: eof = ...").
std::string hdf5_cause() {
  std::vector<std::string> lines;  // innermost first
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(e->desc ? e->desc : "");
        return 0;
      },
      &lines);
  H5Eclear2(H5E_DEFAULT);
  for (const std::string& line : lines) {
    const size_t at = line.find("error message = '");
    if (at == std::string::npos) continue;
    const size_t begin = at + 17, end = line.find('\'', begin);
    return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  std::string cause = lines.empty() ? "unknown HDF5 error" : lines.front();
  std::replace(cause.begin(), cause.end(), '\n', ' ');
  return cause;
}

// Throws Error("what: <HDF5 cause>") unless `ok`; the cause is read before anything else runs.
void expect(bool ok, const std::string& what) {
  if (!ok) throw Error(what + ": " + hdf5_cause());
}

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
TypeInfo type_info(ArrayDType dtype) {
  switch (dtype) {
    case ArrayDType::float32:
      return {H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4};
    case ArrayDType::float64:
      return {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 8};
    case ArrayDType::int64:
      return {H5T_STD_I64LE, H5T_NATIVE_INT64, 8};
    case ArrayDType::uint64:
      return {H5T_STD_U64LE, H5T_NATIVE_UINT64, 8};
    case ArrayDType::uint8:
      return {H5T_STD_U8LE, H5T_NATIVE_UINT8, 1};
    default:
      throw Error("checkpoint: unsupported dtype");
  }
}

ArrayDType classify(hid_t type) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      return size == 4 ? ArrayDType::float32 : size == 8 ? ArrayDType::float64 : ArrayDType::unsupported;
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if (size == 8) return is_signed ? ArrayDType::int64 : ArrayDType::uint64;
      return size == 1 && !is_signed ? ArrayDType::uint8 : ArrayDType::unsupported;
    }
    default:
      return ArrayDType::unsupported;
  }
}

template <typename T>
constexpr ArrayDType dtype_of() {
  if constexpr (std::is_same_v<T, double>) return ArrayDType::float64;
  if constexpr (std::is_same_v<T, int64_t>) return ArrayDType::int64;
  if constexpr (std::is_same_v<T, uint64_t>) return ArrayDType::uint64;
  return ArrayDType::uint8;
}

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

// Bob Jenkins' lookup3 hashlittle(), the checksum HDF5 puts on its metadata.
uint32_t lookup3(const unsigned char* k, size_t length) {
  auto rot = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t a, b, c;
  a = b = c = 0xdeadbeef + static_cast<uint32_t>(length);
  auto word = [&](size_t at, size_t n) {  // little-endian, up to 4 bytes
    uint32_t w = 0;
    for (size_t i = 0; i < n && i < 4; ++i) w |= uint32_t(k[at + i]) << (8 * i);
    return w;
  };
  while (length > 12) {
    a += word(0, 4), b += word(4, 4), c += word(8, 4);
    a -= c, a ^= rot(c, 4), c += b, b -= a, b ^= rot(a, 6), a += c, c -= b, c ^= rot(b, 8), b += a;
    a -= c, a ^= rot(c, 16), c += b, b -= a, b ^= rot(a, 19), a += c, c -= b, c ^= rot(b, 4), b += a;
    length -= 12, k += 12;
  }
  if (length == 0) return c;
  a += word(0, length), b += length > 4 ? word(4, length - 4) : 0, c += length > 8 ? word(8, length - 8) : 0;
  c ^= b, c -= rot(b, 14), a ^= c, a -= rot(c, 11), b ^= a, b -= rot(a, 25), c ^= b, c -= rot(b, 16);
  a ^= c, a -= rot(c, 4), b ^= a, b -= rot(a, 14), c ^= b, c -= rot(b, 24);
  return c;
}

}  // namespace

const char* dtype_name(ArrayDType dtype) {
  static const char* const names[] = {"float32", "float64", "int64", "uint64", "uint8", "unsupported"};
  return names[static_cast<int>(dtype)];
}

// ---------------------------------------------------------------------------------------------
// Writer

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
    std::vector<Attr> attrs = {{kKindKey, Attr::Kind::string, "checkpoint"},
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
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  HEADLAB_CHECK(image.size() >= 48 && std::memcmp(image.data(), signature, 8) == 0 &&
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

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

// HDF5 1.10 trusts the object sizes in a global heap collection, where variable-length strings
// (the attributes) live: an object claiming to be larger than its collection makes H5Aread copy
// from past the collection's buffer (found by tests/fuzz/fuzz_checkpoint, docs/reliability.md).
// Global heaps carry no checksum in any HDF5 format, so they are checked here, on the file's
// bytes, before HDF5 opens it: every collection ("GCOL", version 1, three zero bytes) must lie
// inside the file and every object inside its collection, walked the way HDF5 walks it
// (H5HG__cache_heap_deserialize). Returns what is wrong, or "" when nothing is.
std::string global_heap_problem(const unsigned char* bytes, size_t n) {
  static constexpr unsigned char kFileSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  static constexpr unsigned char kHeapSignature[8] = {'G', 'C', 'O', 'L', 1, 0, 0, 0};
  size_t length_size = 8;  // "size of lengths" from a superblock at offset 0 (else HDF5's default)
  if (n > 14 && std::memcmp(bytes, kFileSignature, 8) == 0) length_size = bytes[8] >= 2 ? bytes[10] : bytes[14];
  if (length_size != 2 && length_size != 4 && length_size != 8) return "";  // HDF5 refuses the file itself
  auto decode = [&](size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < length_size; ++i) v |= uint64_t(bytes[at + i]) << (8 * i);
    return v;
  };
  const size_t header = 8 + length_size, object_header = 8 + length_size;
  for (const unsigned char* hit = bytes;
       (hit = static_cast<const unsigned char*>(::memmem(hit, n - (hit - bytes), kHeapSignature, 8))) != nullptr;
       ++hit) {
    const size_t begin = static_cast<size_t>(hit - bytes);
    if (begin + header > n) return "the global heap at byte " + std::to_string(begin) + " is cut off";
    const uint64_t size = decode(begin + 8);
    if (size < header || size > n - begin)
      return "the global heap at byte " + std::to_string(begin) + " claims " + std::to_string(size) +
             " bytes, the file has " + std::to_string(n - begin) + " from there";
    const size_t end = begin + static_cast<size_t>(size);
    for (size_t p = begin + header; p + object_header <= end;) {
      const unsigned index = bytes[p] | unsigned(bytes[p + 1]) << 8;
      const uint64_t object_size = decode(p + 8);
      // Object 0 is the free space, its size counting its header; the others are padded to 8.
      const uint64_t need = index == 0 ? object_size : object_header + ((object_size + 7) & ~uint64_t(7));
      if (object_size > end - p || need > end - p || need == 0)
        return "the global heap at byte " + std::to_string(begin) + ": object " + std::to_string(index) + " claims " +
               std::to_string(object_size) + " bytes, past the end of its heap";
      p += static_cast<size_t>(need);
    }
  }
  return "";
}

// global_heap_problem on the file at `path` (mapped, not read: checkpoints may be large).
std::string global_heap_problem(const std::string& path, size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";  // H5Fopen reports it
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return "";
  std::string problem = global_heap_problem(static_cast<const unsigned char*>(map), size);
  ::munmap(map, size);
  return problem;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  silence_hdf5();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    HEADLAB_CHECK(err != ENOENT, "checkpoint not found: " << path);
    throw Error(path + ": " + std::strerror(err));
  }
  HEADLAB_CHECK(S_ISREG(st.st_mode), path << ": not a regular file");
  HEADLAB_CHECK(st.st_size > 0, path << ": empty file (corrupt or truncated)");
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());  // reads only the signature: safe before the probe
  if (is_hdf5 < 0) throw Error(path + ": cannot read: " + hdf5_cause());
  HEADLAB_CHECK(is_hdf5 > 0, path << ": not an HDF5 file");
  const std::string heap_problem = global_heap_problem(path, static_cast<size_t>(st.st_size));
  HEADLAB_CHECK(heap_problem.empty(), path << ": corrupt or truncated HDF5 file (" << heap_problem << ")");
  probe_in_child();
  open_file();
}

// HDF5 1.10 can crash on corrupt metadata that it does not checksum and that no check short of a
// second HDF5 parser would catch: fuzz_checkpoint found an invalid free() while it iterated a
// group's dense link storage (fractal-heap blocks carry no checksum). So a forked child first
// makes the calls this reader makes on metadata: open_file() (open, attribute checks, the walk of
// every link and dataset header) and the read of every root attribute. If the child dies, the
// file is reported corrupt and this process never makes those calls; if it lives, the same calls
// on the same bytes are safe here. Dataset contents are not read by the child: they are chunks
// with a Fletcher-32 checksum that HDF5 verifies. Without fork (it failed), the reader goes on.
void CheckpointReader::probe_in_child() {
  const pid_t pid = ::fork();
  if (pid < 0) return;
  if (pid == 0) {
    for (const int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE}) ::signal(sig, SIG_DFL);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
#ifdef HEADLAB_ASAN
    __sanitizer_set_death_callback(nullptr);  // a fuzzer's callback would save the input as a crash
#endif
    try {
      open_file();
      for (const std::string& key : attr_names()) {
        try {
          (void)string_attr(key);
        } catch (const Error&) {
        }
        try {
          (void)int_attr(key);
        } catch (const Error&) {
        }
        try {
          (void)double_attr(key);
        } catch (const Error&) {
        }
      }
    } catch (...) {  // an Error the parent reports itself, when it makes the same call
    }
    ::_exit(0);
  }
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (got != pid || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return;  // got < 0: reaped elsewhere
  throw Error(path_ + ": corrupt HDF5 file (reading its metadata crashes the HDF5 library: " +
              (WIFSIGNALED(status) ? std::string(strsignal(WTERMSIG(status)))
                                   : "exit status " + std::to_string(WEXITSTATUS(status))) +
              ")");
}

void CheckpointReader::open_file() {
  const std::string& path = path_;
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  expect(fapl.ok() && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0, path);
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (file_ < 0) throw Error(path + ": corrupt or truncated HDF5 file (" + hdf5_cause() + ")");
  try {
    HEADLAB_CHECK(has_attr(kKindKey), path << ": not a headlab checkpoint (no " << kKindKey << " attribute)");
    const std::string kind = string_attr(kKindKey);
    HEADLAB_CHECK(kind == "checkpoint", path << ": " << kKindKey << " is '" << kind << "', not 'checkpoint'");
    HEADLAB_CHECK(has_attr(kVersionKey), path << ": not a headlab checkpoint (no " << kVersionKey << " attribute)");
    format_version_ = int_attr(kVersionKey);
    HEADLAB_CHECK(format_version_ == kCheckpointFormatVersion, path << ": unsupported checkpoint format version "
                                                                    << format_version_ << " (this build reads "
                                                                    << kCheckpointFormatVersion << ")");
    struct Visit {
      std::vector<Entry>* entries;
      std::string error;
    } visit{&entries_, {}};
    const herr_t rc = H5Lvisit(
        file_, H5_INDEX_NAME, H5_ITER_INC,
        [](hid_t group, const char* name, const H5L_info_t* link, void* data) -> herr_t {
          auto* v = static_cast<Visit*>(data);
          H5O_info_t object;
          if (link->type != H5L_TYPE_HARD) return 0;
          if (H5Oget_info_by_name2(group, name, &object, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return -1;
          if (object.type != H5O_TYPE_DATASET) return 0;
          Hid dataset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
          if (!dataset.ok()) return -1;
          Hid space(H5Dget_space(dataset), H5Sclose), type(H5Dget_type(dataset), H5Tclose);
          const int rank = space.ok() ? H5Sget_simple_extent_ndims(space) : -1;
          if (rank < 0 || !type.ok()) return -1;
          if (rank > kMaxRank) {
            v->error =
                std::string(name) + " has rank " + std::to_string(rank) + ", more than " + std::to_string(kMaxRank);
            return -1;
          }
          hsize_t dims[kMaxRank] = {};
          if (H5Sget_simple_extent_dims(space, dims, nullptr) < 0) return -1;
          Shape shape;
          shape.rank = rank;
          for (int d = 0; d < rank; ++d) shape.dims[d] = static_cast<int64_t>(dims[d]);
          try {  // no exception may cross HDF5's C frames
            v->entries->push_back({name, shape, classify(type)});
          } catch (...) {
            return -1;
          }
          return 0;
        },
        &visit);
    if (rc < 0)
      throw Error(path + ": " + (visit.error.empty() ? "corrupt checkpoint (" + hdf5_cause() + ")" : visit.error));
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  } catch (...) {
    H5Fclose(file_);
    file_ = -1;
    throw;
  }
}

CheckpointReader::~CheckpointReader() {
  if (file_ >= 0) H5Fclose(file_);
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

const CheckpointReader::Entry* CheckpointReader::find(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

bool CheckpointReader::has(const std::string& name) const {
  return find(name) != nullptr;
}

const CheckpointReader::Entry& CheckpointReader::entry(const std::string& name) const {
  const Entry* e = find(name);
  HEADLAB_CHECK(e, path_ << ": no dataset " << name << " in the checkpoint");
  return *e;
}

Shape CheckpointReader::shape(const std::string& name) const {
  return entry(name).shape;
}
ArrayDType CheckpointReader::dtype(const std::string& name) const {
  return entry(name).dtype;
}

void CheckpointReader::read_raw(const Entry& e, ArrayDType want, void* out) const {
  HEADLAB_CHECK(e.dtype == want,
                path_ << ": " << e.name << " is " << dtype_name(e.dtype) << ", expected " << dtype_name(want));
  if (e.shape.numel() == 0) return;
  Hid dataset(H5Dopen2(file_, e.name.c_str(), H5P_DEFAULT), H5Dclose);
  const bool ok = dataset.ok() && H5Dread(dataset, type_info(want).mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
  if (!ok) throw Error(path_ + ": cannot read " + e.name + ", corrupt checkpoint (" + hdf5_cause() + ")");
}

void CheckpointReader::read_into(const std::string& name, const Tensor<float>& out) const {
  const Entry& e = entry(name);
  HEADLAB_CHECK(e.shape == out.shape(),
                path_ << ": " << name << " has shape " << e.shape.str() << ", the model expects " << out.shape().str());
  HEADLAB_CHECK(!out.empty() || out.numel() == 0, path_ << ": reading " << name << " into an empty tensor view");
  if (out.is_contiguous()) return read_raw(e, ArrayDType::float32, out.data());
  std::vector<float> staging(out.numel());
  read_raw(e, ArrayDType::float32, staging.data());
  out.copy_from(Tensor<float>(staging.data(), out.shape()));
}

template <CheckpointArrayElement T>
std::vector<T> CheckpointReader::read_array(const std::string& name) const {
  const Entry& e = entry(name);
  std::vector<T> out(e.shape.numel());
  read_raw(e, dtype_of<T>(), out.data());
  return out;
}
template std::vector<double> CheckpointReader::read_array<double>(const std::string&) const;
template std::vector<int64_t> CheckpointReader::read_array<int64_t>(const std::string&) const;
template std::vector<uint64_t> CheckpointReader::read_array<uint64_t>(const std::string&) const;
template std::vector<uint8_t> CheckpointReader::read_array<uint8_t>(const std::string&) const;

std::vector<std::string> CheckpointReader::attr_names() const {
  std::vector<std::string> out;
  const herr_t rc = H5Aiterate_by_name(
      file_, "/", H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
      },
      &out, H5P_DEFAULT);
  if (rc < 0) throw Error(path_ + ": cannot list attributes (" + hdf5_cause() + ")");
  std::sort(out.begin(), out.end());
  return out;
}

bool CheckpointReader::has_attr(const std::string& key) const {
  const htri_t exists = H5Aexists_by_name(file_, "/", key.c_str(), H5P_DEFAULT);
  if (exists < 0) throw Error(path_ + ": cannot look up attribute " + key + " (" + hdf5_cause() + ")");
  return exists > 0;
}

namespace {
// Opens root attribute `key` of `file` and checks it holds one value of class `want`.
Hid open_attr(hid_t file, const std::string& path, const std::string& key, H5T_class_t want) {
  static const auto describe = [](H5T_class_t c) {
    return c == H5T_INTEGER ? "an integer" : c == H5T_FLOAT ? "a float" : c == H5T_STRING ? "a string" : "another type";
  };
  const htri_t exists = H5Aexists_by_name(file, "/", key.c_str(), H5P_DEFAULT);
  HEADLAB_CHECK(exists >= 0, path << ": cannot look up attribute " << key << " (" << hdf5_cause() << ")");
  HEADLAB_CHECK(exists > 0, path << ": missing attribute " << key);
  Hid attr(H5Aopen_by_name(file, "/", key.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  expect(attr.ok(), path + ": cannot open attribute " + key);
  Hid type(H5Aget_type(attr), H5Tclose), space(H5Aget_space(attr), H5Sclose);
  expect(type.ok() && space.ok(), path + ": cannot open attribute " + key);
  const H5T_class_t got = H5Tget_class(type);
  HEADLAB_CHECK(got == want, path << ": attribute " << key << " is " << describe(got) << ", not " << describe(want));
  HEADLAB_CHECK(H5Sget_simple_extent_npoints(space) == 1, path << ": attribute " << key << " is not a single value");
  return attr;
}
}  // namespace

std::string CheckpointReader::string_attr(const std::string& key) const {
  Hid attr = open_attr(file_, path_, key, H5T_STRING);
  Hid file_type(H5Aget_type(attr), H5Tclose), mem_type(H5Tcopy(file_type), H5Tclose);
  expect(file_type.ok() && mem_type.ok(), path_ + ": cannot read attribute " + key);
  std::string value;
  if (H5Tis_variable_str(file_type) > 0) {
    char* text = nullptr;
    expect(H5Aread(attr, mem_type, &text) >= 0, path_ + ": cannot read attribute " + key);
    value = text ? text : "";
    H5free_memory(text);
  } else {
    value.assign(H5Tget_size(file_type), '\0');
    expect(H5Aread(attr, mem_type, value.data()) >= 0, path_ + ": cannot read attribute " + key);
    value.resize(std::strlen(value.c_str()));
  }
  return value;
}

int64_t CheckpointReader::int_attr(const std::string& key) const {
  int64_t value = 0;
  Hid attr = open_attr(file_, path_, key, H5T_INTEGER);
  expect(H5Aread(attr, H5T_NATIVE_INT64, &value) >= 0, path_ + ": cannot read attribute " + key);
  return value;
}

double CheckpointReader::double_attr(const std::string& key) const {
  double value = 0;
  Hid attr = open_attr(file_, path_, key, H5T_FLOAT);
  expect(H5Aread(attr, H5T_NATIVE_DOUBLE, &value) >= 0, path_ + ": cannot read attribute " + key);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Checkpoint directories

namespace {
bool parse_step(const std::string& digits, int64_t& step) {
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::from_chars(digits.data(), digits.data() + digits.size(), step).ec == std::errc();
}

std::vector<fs::path> list_dir(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir, ec) && !ec) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  HEADLAB_CHECK(!ec, "cannot list " << dir.string() << ": " << ec.message());
  return out;
}
}  // namespace

std::string checkpoint_path(const std::string& run_dir, int64_t step) {
  HEADLAB_CHECK(step >= 0, "checkpoint_path: negative step " << step);
  char name[40];
  std::snprintf(name, sizeof name, "step_%08lld.h5", static_cast<long long>(step));
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

std::string best_checkpoint_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoints" / "best.h5").string();
}

std::vector<CheckpointFile> list_checkpoints(const std::string& run_dir) {
  std::vector<CheckpointFile> out;
  for (const fs::path& p : list_dir(fs::path(run_dir) / "checkpoints")) {
    const std::string name = p.filename().string();
    int64_t step;
    std::error_code ec;
    if (name.size() > 8 && name.starts_with("step_") && name.ends_with(".h5") &&
        parse_step(name.substr(5, name.size() - 8), step) && fs::is_regular_file(p, ec))
      out.push_back({step, p.string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::tie(a.step, a.path) < std::tie(b.step, b.path);
  });
  return out;
}

std::optional<CheckpointFile> newest_checkpoint(const std::string& run_dir) {
  std::vector<CheckpointFile> all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::string> prune_checkpoints(const std::string& run_dir, int keep_last, const std::string& best_path) {
  HEADLAB_CHECK(keep_last >= 0, "prune_checkpoints: keep_last=" << keep_last << " is negative");
  std::vector<std::string> doomed;
  const std::vector<CheckpointFile> all = list_checkpoints(run_dir);
  // equivalent() compares the files, so `best_path` may be spelled differently or be a link; if it
  // cannot tell (an error), compare the normalised paths instead.
  auto is_best = [&](const std::string& p) {
    std::error_code ec, ec_p, ec_best;
    const bool same = !best_path.empty() && fs::equivalent(p, best_path, ec);
    if (best_path.empty() || !ec) return same;
    return fs::absolute(p, ec_p).lexically_normal() == fs::absolute(best_path, ec_best).lexically_normal();
  };
  for (size_t i = 0; i + keep_last < all.size(); ++i)
    if (!is_best(all[i].path)) doomed.push_back(all[i].path);
  // Temp files of commits whose process is gone (killed mid-write); live writers are left alone.
  for (const fs::path& p : list_dir(fs::path(run_dir) / "checkpoints")) {
    const std::string name = p.filename().string();
    const size_t at = name.rfind(".h5.tmp.");
    int64_t pid;
    if (at != std::string::npos && parse_step(name.substr(at + 8), pid) && pid > 0 && pid != ::getpid() &&
        ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      doomed.push_back(p.string());
  }
  for (const std::string& p : doomed) {
    std::error_code ec;
    fs::remove(p, ec);
    HEADLAB_CHECK(!ec, "prune_checkpoints: cannot delete " << p << ": " << ec.message());
  }
  return doomed;
}

}  // namespace headlab
