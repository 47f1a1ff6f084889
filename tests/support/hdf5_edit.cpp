#include "support/hdf5_edit.h"

#include <hdf5.h>

#include <catch2/catch.hpp>

namespace headlab::test {

void delete_root_attrs(const std::string& path, const std::vector<std::string>& keys) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  for (const std::string& key : keys) CHECK(H5Adelete(file, key.c_str()) >= 0);
  REQUIRE(H5Fclose(file) >= 0);
}

void set_root_string_attr(const std::string& path, const std::string& key, const std::string& value) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  if (H5Aexists(file, key.c_str()) > 0) CHECK(H5Adelete(file, key.c_str()) >= 0);
  const hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
  CHECK(H5Tset_size(type, H5T_VARIABLE) >= 0);
  CHECK(H5Tset_cset(type, H5T_CSET_UTF8) >= 0);
  const hid_t attr = H5Acreate2(file, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* text = value.c_str();
  CHECK(H5Awrite(attr, type, &text) >= 0);
  CHECK((H5Aclose(attr) >= 0 && H5Sclose(space) >= 0 && H5Tclose(type) >= 0));
  REQUIRE(H5Fclose(file) >= 0);
}

}  // namespace headlab::test
