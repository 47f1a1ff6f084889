// CheckpointReader: opens and validates a file (after the guards in checkpoint_guards.cpp),
// indexes its datasets, and reads datasets and root attributes with one-line errors.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "checkpoint_guards.h"
#include "hdf5_util.h"
#include "headlab/io/checkpoint.h"

namespace headlab {

static_assert(std::is_same_v<hid_t, int64_t>, "CheckpointReader keeps its hid_t in an int64_t");
using namespace hdf5;

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
  const std::string layout_problem = file_layout_problem(path, static_cast<size_t>(st.st_size));
  HEADLAB_CHECK(layout_problem.empty(), path << ": corrupt or truncated HDF5 file (" << layout_problem << ")");
  probe_in_child();
  open_file();
}

void CheckpointReader::open_file() {
  const std::string& path = path_;
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  expect(fapl.ok() && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0, path);
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (file_ < 0) throw Error(path + ": corrupt or truncated HDF5 file (" + hdf5_cause() + ")");
  try {
    HEADLAB_CHECK(has_attr(kKindKey), path << ": not a headlab file (no " << kKindKey << " attribute)");
    const std::string kind = string_attr(kKindKey);
    const std::optional<FileKind> known = file_kind_from_name(kind);
    HEADLAB_CHECK(known, path << ": " << kKindKey << " is '" << kind << "', not a kind this build reads ("
                              << known_file_kind_names() << ")");
    kind_ = *known;
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

void CheckpointReader::require_kind(FileKind want) const {
  HEADLAB_CHECK(kind_ == want, path_ << ": " << describe_file_kind(kind_) << ", not " << file_kind_noun(want));
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

}  // namespace headlab
