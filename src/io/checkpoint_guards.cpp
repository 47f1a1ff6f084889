// The reader's guards against files that would crash the HDF5 library: a check of the global
// heaps on the file's bytes, and a forked child that makes the reader's metadata calls first.
#include "checkpoint_guards.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "headlab/io/checkpoint.h"
#include "hdf5_util.h"

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

namespace {

// HDF5 1.10 trusts the object sizes in a global heap collection, where variable-length strings
// (the attributes) live: an object claiming to be larger than its collection makes H5Aread copy
// from past the collection's buffer (found by tests/fuzz/fuzz_checkpoint, docs/reliability.md).
// Global heaps carry no checksum in any HDF5 format, so they are checked here, on the file's
// bytes, before HDF5 opens it: every collection ("GCOL", version 1, three zero bytes) must lie
// inside the file and every object inside its collection, walked the way HDF5 walks it
// (H5HG__cache_heap_deserialize). Returns what is wrong, or "" when nothing is.
std::string global_heap_problem(const unsigned char* bytes, size_t n) {
  static constexpr unsigned char kHeapSignature[8] = {'G', 'C', 'O', 'L', 1, 0, 0, 0};
  size_t length_size = 8;  // "size of lengths" from a superblock at offset 0 (else HDF5's default)
  if (n > 14 && std::memcmp(bytes, hdf5::kFileSignature, 8) == 0) length_size = bytes[8] >= 2 ? bytes[10] : bytes[14];
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

// A version 2 or 3 superblock (what headlab writes) records the file's end-of-file address under
// its checksum: a file shorter than that was cut short. Seen on the bytes, a truncated file (the
// commonest corruption) costs no forked probe. "" for a whole file, and for a file with another or
// a corrupt superblock, which HDF5 reports itself.
std::string truncation_problem(const unsigned char* bytes, size_t n) {
  if (n < 48 || std::memcmp(bytes, hdf5::kFileSignature, 8) != 0 || (bytes[8] != 2 && bytes[8] != 3) || bytes[9] != 8 ||
      bytes[10] != 8)
    return "";
  auto le = [&](size_t at, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) v |= uint64_t(bytes[at + i]) << (8 * i);
    return v;
  };
  // signature (8), version, offset and length sizes, flags, base address (at 12), superblock
  // extension (20), end of file (28), root group header (36), lookup3 of the 44 bytes before it.
  if (hdf5::lookup3(bytes, 44) != le(44, 4) || le(12, 8) != 0) return "";
  const uint64_t end = le(28, 8);
  if (end <= n) return "";
  return "cut short: " + std::to_string(n) + " of the " + std::to_string(end) + " bytes its superblock records";
}

}  // namespace

// truncation_problem, then global_heap_problem, on the file at `path` (mapped, not read:
// checkpoints may be large).
std::string file_layout_problem(const std::string& path, size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";  // H5Fopen reports it
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return "";
  const auto* bytes = static_cast<const unsigned char*>(map);
  std::string problem = truncation_problem(bytes, size);
  if (problem.empty()) problem = global_heap_problem(bytes, size);
  ::munmap(map, size);
  return problem;
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

}  // namespace headlab
