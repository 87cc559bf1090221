#include "support/File.h"

#include "support/Error.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

namespace {

std::string osReason() { return std::strerror(errno); }

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::vector<std::byte> readFileBytes(const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) KILN_THROW("cannot open '{}': {}", path, osReason());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) KILN_THROW("cannot stat '{}': {}", path, osReason());
  if (S_ISDIR(st.st_mode)) KILN_THROW("cannot read '{}': it is a directory", path);
  // A pipe or a device has no size to check: it is read up to kMaxStreamBytes (/dev/zero would
  // otherwise fill the memory before anything could parse it).
  const bool regular = S_ISREG(st.st_mode);
  std::vector<std::byte> out;
  try {
    if (regular) out.reserve(static_cast<size_t>(st.st_size));
    std::byte buf[1 << 16];
    while (true) {
      ssize_t n = ::read(f.fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        KILN_THROW("cannot read '{}': {}", path, osReason());
      }
      if (n == 0) break;
      if (!regular && out.size() + static_cast<size_t>(n) > kMaxStreamBytes)
        KILN_THROW("cannot read '{}': it is not a regular file and gave more than {} MiB without ending", path,
                   kMaxStreamBytes >> 20);
      out.insert(out.end(), buf, buf + n);
    }
  } catch (const std::bad_alloc&) {
    KILN_THROW("cannot read '{}': out of memory for its {} bytes", path,
               regular ? static_cast<int64_t>(st.st_size) : static_cast<int64_t>(out.size()));
  }
  return out;
}

std::string readTextFile(const std::string& path) {
  std::vector<std::byte> bytes = readFileBytes(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

namespace {

/// Writes `bytes` through `path` as it is: a device, a pipe or a socket (nothing to replace).
void writeThrough(const std::string& path, std::span<const std::byte> bytes) {
  Fd f;
  f.fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (f.fd < 0) KILN_THROW("cannot write '{}': {}", path, osReason());
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      KILN_THROW("cannot write '{}': {}", path, osReason());
    }
    done += static_cast<size_t>(n);
  }
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) KILN_THROW("cannot write '{}': close failed: {}", path, osReason());
}

}  // namespace

std::string linkTarget(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();
    fs::path next = fs::read_symlink(p, ec);
    if (ec) KILN_THROW("cannot write '{}': cannot read the link '{}': {}", path, p.string(), ec.message());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  KILN_THROW("cannot write '{}': too many levels of symbolic links", path);
}

void writeFileAtomically(const std::string& requested, std::span<const std::byte> bytes) {
  // What exists there and is not a regular file is written through, never replaced (as root,
  // `-o /dev/null` would otherwise turn the device into a file); a link's target is replaced.
  struct stat st {};
  if (::stat(requested.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) KILN_THROW("cannot write '{}': it is a directory", requested);
    writeThrough(requested, bytes);
    return;
  }
  const std::string path = linkTarget(requested);
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  Fd f;
  for (int attempt = 0; attempt < 100 && f.fd < 0; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
    // 0666 minus the umask: the same permissions a plain fopen would give the final file.
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0 && errno != EEXIST) KILN_THROW("cannot write '{}': cannot create '{}': {}", path, tmp, osReason());
  }
  if (f.fd < 0) KILN_THROW("cannot write '{}': no free temporary file name next to it", path);
  auto failAndRemove = [&](const std::string& what) {
    std::string reason = osReason();
    ::close(f.fd);
    f.fd = -1;
    ::unlink(tmp.c_str());
    KILN_THROW("cannot write '{}': {}: {}", path, what, reason);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      failAndRemove("write failed");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(f.fd) != 0) failAndRemove("fsync failed");
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) {
    std::string reason = osReason();
    ::unlink(tmp.c_str());
    KILN_THROW("cannot write '{}': close failed: {}", path, reason);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string reason = osReason();
    ::unlink(tmp.c_str());
    KILN_THROW("cannot write '{}': rename from '{}' failed: {}", path, tmp, reason);
  }
}

void writeFileAtomically(const std::string& path, std::string_view text) {
  writeFileAtomically(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

std::string codeCacheDir(std::string_view backend) {
  const char* dir = std::getenv("KILN_CACHE_DIR");
  if (!dir || !*dir) return "";
  return (std::filesystem::path(dir) / backend).string();
}

namespace {

/// A 64-bit hash of `bytes`, eight at a time (fast enough to check megabytes of objects per compile).
uint64_t entryHash(std::string_view bytes) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ bytes.size();
  auto mix = [&](uint64_t w) {
    h ^= w * 0xBF58476D1CE4E5B9ull;
    h = (h << 31 | h >> 33) * 0x94D049BB133111EBull;
  };
  size_t at = 0;
  for (; at + 8 <= bytes.size(); at += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + at, 8);
    mix(w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + at, bytes.size() - at);
  mix(tail);
  return h ^ (h >> 29);
}

}  // namespace

std::string sealCacheEntry(std::string payload) {
  const uint64_t h = entryHash(payload);
  payload.append(reinterpret_cast<const char*>(&h), 8);
  return payload;
}

std::optional<std::string> unsealCacheEntry(std::string bytes) {
  if (bytes.size() < 8) return std::nullopt;
  uint64_t h;
  std::memcpy(&h, bytes.data() + bytes.size() - 8, 8);
  bytes.resize(bytes.size() - 8);
  if (entryHash(bytes) != h) return std::nullopt;
  return bytes;
}

std::string readCacheFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  try {
    return readTextFile(path);
  } catch (const Error&) {
    return "";
  }
}

void writeCacheFile(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  try {
    writeFileAtomically(path, bytes);
  } catch (const Error&) {
  }
}

bool looksLikeElf64(std::string_view bytes) {
  if (bytes.size() < 64 || bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4) || bytes[4] != 2 || bytes[5] != 1)
    return false;
  auto read = [&](uint64_t at, auto value) -> std::optional<decltype(value)> {
    if (at > bytes.size() || bytes.size() - at < sizeof(value)) return std::nullopt;
    std::memcpy(&value, bytes.data() + at, sizeof(value));
    return value;
  };
  // Every table and every section with contents must lie within the bytes.
  auto within = [&](uint64_t offset, uint64_t size) { return offset <= bytes.size() && size <= bytes.size() - offset; };
  const uint64_t shoff = *read(0x28, uint64_t{}), phoff = *read(0x20, uint64_t{});
  const uint16_t phentsize = *read(0x36, uint16_t{}), phnum = *read(0x38, uint16_t{});
  const uint16_t shentsize = *read(0x3A, uint16_t{}), shnum = *read(0x3C, uint16_t{});
  if (!within(shoff, uint64_t{shentsize} * shnum) || !within(phoff, uint64_t{phentsize} * phnum)) return false;
  if (shnum > 0 && shentsize < 0x28) return false;
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t at = shoff + i * shentsize;
    const uint32_t type = *read(at + 4, uint32_t{});
    if (type != 8 && !within(*read(at + 0x18, uint64_t{}), *read(at + 0x20, uint64_t{}))) return false;  // 8: NOBITS
  }
  if (phnum > 0 && phentsize < 0x28) return false;
  for (uint64_t i = 0; i < phnum; ++i) {
    const uint64_t at = phoff + i * phentsize;
    if (!within(*read(at + 0x08, uint64_t{}), *read(at + 0x20, uint64_t{}))) return false;
  }
  return true;
}

}  // namespace kiln
