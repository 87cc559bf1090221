#include "runtime/FileIO.h"

#include "support/Error.h"

#include <cstring>
#include <zlib.h>

namespace kiln::rt {

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

}  // namespace kiln::rt
