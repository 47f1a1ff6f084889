#include "headlab/common/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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
    if (!out.good()) {  // a full disk: leave no partial temp file behind
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      HEADLAB_CHECK(false, "cannot write " << tmp.string() << " (disk full or not writable?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  HEADLAB_CHECK(!ec, "cannot rename " << tmp.string() << " to " << path.string() << ": " << ec.message());
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  HEADLAB_CHECK(std::filesystem::is_regular_file(path, ec),
                "cannot read " << what << " '" << path.string() << "'"
                               << (std::filesystem::is_directory(path, ec) ? ": it is a directory" : ""));
  std::ifstream in(path, std::ios::binary);
  HEADLAB_CHECK(in, "cannot read " << what << " '" << path.string() << "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

FileLock::FileLock(const std::filesystem::path& path, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  HEADLAB_CHECK(fd_ >= 0, "cannot create the lock file " << path.string() << ": " << std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {0};
    [[maybe_unused]] const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    HEADLAB_CHECK(err != EWOULDBLOCK, what << " is in use by another headlab process"
                                           << (holder[0] ? std::string(" (pid ") + holder + ")" : std::string()));
    throw Error("cannot lock " + path.string() + ": " + std::strerror(err));
  }
  // The holder's pid, for the message another process prints; the lock itself is the flock.
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace headlab
