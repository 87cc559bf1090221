#include "runtime/FileIO.h"

#include "support/Error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace kiln::rt {

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
  std::vector<std::byte> out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  std::byte buf[1 << 16];
  while (true) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      KILN_THROW("cannot read '{}': {}", path, osReason());
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const std::string& what, uint64_t maxBytes) {
  std::vector<std::byte> out;
  size_t consumed = 0;
  // A gzip file may hold several members back to back (e.g. `cat a.gz b.gz`); gzip -d reads them all.
  while (consumed < bytes.size()) {
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) KILN_THROW("{}: cannot initialise zlib", what);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(bytes.data() + consumed));
    size_t remaining = bytes.size() - consumed;
    zs.avail_in = static_cast<uInt>(std::min<size_t>(remaining, 1u << 30));
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      size_t old = out.size();
      if (old >= maxBytes) {
        inflateEnd(&zs);
        KILN_THROW("{}: gzip data decompresses to more than {} bytes", what, maxBytes);
      }
      size_t chunk = std::min<uint64_t>(std::max<size_t>(old, 1 << 16), maxBytes - old);
      chunk = std::min<size_t>(chunk, 1u << 30);
      out.resize(old + chunk);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);
      zs.avail_out = static_cast<uInt>(chunk);
      if (zs.avail_in == 0 && remaining > zs.total_in) {
        size_t left = remaining - zs.total_in;
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(bytes.data() + consumed + zs.total_in));
        zs.avail_in = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
      }
      rc = inflate(&zs, Z_NO_FLUSH);
      out.resize(old + (chunk - zs.avail_out));
      if (rc == Z_STREAM_END) break;
      if (rc == Z_BUF_ERROR && zs.avail_in == 0 && zs.total_in >= remaining) {
        inflateEnd(&zs);
        KILN_THROW("{}: truncated gzip data (unexpected end of file)", what);
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
        inflateEnd(&zs);
        KILN_THROW("{}: corrupt gzip data: {}", what, msg);
      }
    }
    consumed += zs.total_in;
    inflateEnd(&zs);
    // Trailing zero padding after the last member is tolerated, as gzip -d does.
    bool onlyZeros = true;
    for (size_t i = consumed; i < bytes.size() && onlyZeros; ++i) onlyZeros = bytes[i] == std::byte{0};
    if (onlyZeros) break;
  }
  return out;
}

std::vector<std::byte> gzip(std::span<const std::byte> bytes) {
  KILN_CHECK(bytes.size() < (size_t{1} << 32), "gzip: {} bytes is too large to compress in one call", bytes.size());
  z_stream zs{};
  int rc = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  KILN_ASSERT(rc == Z_OK, "deflateInit2 failed: {}", rc);
  std::vector<std::byte> out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  rc = deflate(&zs, Z_FINISH);
  KILN_ASSERT(rc == Z_STREAM_END, "deflate did not finish: {}", rc);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<std::byte> readMaybeGzipFile(const std::string& path, uint64_t maxBytes) {
  std::vector<std::byte> raw = readFileBytes(path);
  if (raw.size() >= 2 && raw[0] == std::byte{0x1f} && raw[1] == std::byte{0x8b})
    return gunzip(raw, "'" + path + "'", maxBytes);
  return raw;
}

void writeFileAtomically(const std::string& path, std::span<const std::byte> bytes) {
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

}  // namespace kiln::rt
