#include "headlab/common/files.h"

#include <fstream>
#include <sstream>

#include "headlab/common/error.h"

namespace headlab {

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    HEADLAB_CHECK(out.good(), "cannot write " << tmp.string() << " (disk full or not writable?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  HEADLAB_CHECK(!ec, "cannot rename " << tmp.string() << " to " << path.string() << ": " << ec.message());
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  HEADLAB_CHECK(std::filesystem::is_regular_file(path, ec), "cannot read " << what << " '" << path.string() << "'"
                                                                           << (std::filesystem::is_directory(path, ec)
                                                                                   ? ": it is a directory"
                                                                                   : ""));
  std::ifstream in(path, std::ios::binary);
  HEADLAB_CHECK(in, "cannot read " << what << " '" << path.string() << "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace headlab
