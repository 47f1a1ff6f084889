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

}  // namespace headlab::test
