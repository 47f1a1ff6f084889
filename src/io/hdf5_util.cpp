#include "hdf5_util.h"

#include <algorithm>
#include <vector>

namespace headlab::hdf5 {

// In thread-safe builds the setting belongs to the calling thread's stack, hence thread_local.
void silence_hdf5() {
  thread_local bool silenced = false;
  if (!silenced) silenced = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;
}

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

void expect(bool ok, const std::string& what) {
  if (!ok) throw Error(what + ": " + hdf5_cause());
}

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

}  // namespace headlab::hdf5

namespace headlab {

const char* dtype_name(ArrayDType dtype) {
  static const char* const names[] = {"float32", "float64", "int64", "uint64", "uint8", "unsupported"};
  return names[static_cast<int>(dtype)];
}

}  // namespace headlab
