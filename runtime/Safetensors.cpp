#include "runtime/Safetensors.h"

#include "runtime/FileIO.h"
#include "runtime/Json.h"
#include "support/Error.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace kiln::rt {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little endian; a big-endian host needs byte swapping here");

namespace {

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kNames[] = {
    {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"}, {DType::f64, "F64"},
    {DType::i32, "I32"}, {DType::i64, "I64"}, {DType::boolean, "BOOL"},
};
// Valid safetensors dtypes that kiln has no element type for; named separately so the message can
// say "unsupported" rather than "unknown".
constexpr std::string_view kForeignNames[] = {"U8",  "I8",  "U16", "I16", "U32", "U64",
                                              "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                              "F6_E3M2", "F4", "C64"};

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

std::string tensorWhat(std::string_view what, std::string_view name) {
  return fmt::format("{}: tensor {}", what, json::quote(name));
}

Entry parseEntry(std::string_view what, const std::string& name, const json::Value& info) {
  std::string where = tensorWhat(what, name);
  KILN_CHECK(info.isObject(), "{}: expected an object with dtype, shape and data_offsets, found a {}", where,
             info.kindName());
  const json::Value* dt = info.find("dtype");
  const json::Value* shape = info.find("shape");
  const json::Value* offsets = info.find("data_offsets");
  KILN_CHECK(dt, "{}: missing \"dtype\"", where);
  KILN_CHECK(shape, "{}: missing \"shape\"", where);
  KILN_CHECK(offsets, "{}: missing \"data_offsets\"", where);
  KILN_CHECK(dt->isString(), "{}: \"dtype\" must be a string, found a {}", where, dt->kindName());

  Entry e{name, DType::f32, {}, 0, 0};
  std::optional<DType> d = dtypeFromSafetensors(dt->text);
  if (!d) {
    bool foreign = std::find(std::begin(kForeignNames), std::end(kForeignNames), dt->text) != std::end(kForeignNames);
    KILN_THROW("{}: {} dtype {} (kiln reads F32, F16, BF16, F64, I32, I64 and BOOL)", where,
               foreign ? "unsupported" : "unknown", json::quote(dt->text));
  }
  e.dtype = *d;

  KILN_CHECK(shape->isArray(), "{}: \"shape\" must be an array, found a {}", where, shape->kindName());
  // Element count and byte size, with overflow checks: a hostile shape like [2^40, 2^40] must not
  // wrap around to a small number that happens to match the offsets. The product of the non-zero
  // dimensions must fit even when a zero makes the tensor empty, so element counts never overflow.
  uint64_t product = static_cast<uint64_t>(dtypeSize(e.dtype));
  bool overflow = false, empty = false;
  for (const json::Value& dim : shape->items) {
    std::optional<int64_t> v = dim.asInt64();
    KILN_CHECK(v && *v >= 0, "{}: shape entries must be non-negative integers, found {}", where,
               dim.isNumber() ? dim.text : std::string(dim.kindName()));
    e.shape.push_back(*v);
    uint64_t u = static_cast<uint64_t>(*v);
    if (u == 0) empty = true;
    else if (product > std::numeric_limits<uint64_t>::max() / u) overflow = true;
    else product *= u;
  }
  KILN_CHECK(!overflow && product <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
             "{}: shape [{}] is too large (its size in bytes overflows)", where, fmt::join(e.shape, ","));
  uint64_t bytes = empty ? 0 : product;

  KILN_CHECK(offsets->isArray() && offsets->items.size() == 2,
             "{}: \"data_offsets\" must be an array of two integers [begin, end]", where);
  std::optional<uint64_t> b = offsets->items[0].asUInt64(), en = offsets->items[1].asUInt64();
  KILN_CHECK(b && en, "{}: \"data_offsets\" must be non-negative integers", where);
  KILN_CHECK(*b <= *en, "{}: data_offsets [{}, {}] end before they begin", where, *b, *en);
  e.begin = *b;
  e.end = *en;
  KILN_CHECK(e.end - e.begin == bytes,
             "{}: data_offsets [{}, {}] span {} bytes but {}[{}] needs {} bytes", where, e.begin, e.end,
             e.end - e.begin, safetensorsDTypeName(e.dtype), fmt::join(e.shape, ","), bytes);
  return e;
}

void checkBools(std::string_view what, const Entry& e, const HostTensor& t) {
  const auto* p = t.as<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    KILN_CHECK(p[i] <= 1, "{}: BOOL element {} has byte value {} (must be 0 or 1)", tensorWhat(what, e.name), i,
               static_cast<int>(p[i]));
}

}  // namespace

std::string_view safetensorsDTypeName(DType t) {
  for (const DTypeName& n : kNames)
    if (n.dtype == t) return n.name;
  KILN_ASSERT(false, "dtype {} has no safetensors name", static_cast<int>(t));
  return "";
}

std::optional<DType> dtypeFromSafetensors(std::string_view name) {
  for (const DTypeName& n : kNames)
    if (n.name == name) return n.dtype;
  return std::nullopt;
}

NamedTensors parseSafetensors(std::span<const std::byte> bytes, std::string_view what, Metadata* metadata) {
  KILN_CHECK(bytes.size() >= 8, "{}: not a safetensors file: {} bytes, shorter than the 8-byte header length",
             what, bytes.size());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  uint64_t available = bytes.size() - 8;
  KILN_CHECK(n <= kMaxSafetensorsHeader, "{}: header length {} exceeds the limit of {} bytes (not a safetensors file?)",
             what, n, kMaxSafetensorsHeader);
  KILN_CHECK(n <= available, "{}: header length {} exceeds the {} bytes after the length field (file truncated?)",
             what, n, available);
  std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n));
  KILN_CHECK(!header.empty() && header[0] == '{', "{}: the header must be a json object starting with '{{'", what);

  json::Value root = json::parse(header, fmt::format("{}: header", what));
  KILN_CHECK(root.isObject(), "{}: the header must be a json object", what);

  std::span<const std::byte> buffer = bytes.subspan(8 + static_cast<size_t>(n));
  std::vector<Entry> entries;
  for (const auto& [name, info] : root.members) {
    if (name == "__metadata__") {
      KILN_CHECK(info.isObject(), "{}: \"__metadata__\" must be an object of strings", what);
      for (const auto& [k, v] : info.members) {
        KILN_CHECK(v.isString(), "{}: \"__metadata__\" value for {} must be a string, found a {}", what,
                   json::quote(k), v.kindName());
        if (metadata) (*metadata)[k] = v.text;
      }
      continue;
    }
    entries.push_back(parseEntry(what, name, info));
  }

  // The reference implementation requires the tensors to tile the buffer: sorted by offset, each
  // begins where the previous ends, and the last ends at the end of the file.
  std::vector<const Entry*> byOffset;
  for (const Entry& e : entries) byOffset.push_back(&e);
  std::stable_sort(byOffset.begin(), byOffset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : byOffset) {
    KILN_CHECK(e->end <= buffer.size(), "{}: data_offsets [{}, {}] run past the end of the {}-byte data buffer",
               tensorWhat(what, e->name), e->begin, e->end, buffer.size());
    if (e->begin < expected)
      KILN_THROW("{}: data_offsets [{}, {}] overlap tensor {} ([{}, {}])", tensorWhat(what, e->name), e->begin,
                 e->end, json::quote(previous->name), previous->begin, previous->end);
    KILN_CHECK(e->begin == expected, "{}: data_offsets [{}, {}] leave a gap: bytes [{}, {}) belong to no tensor",
               tensorWhat(what, e->name), e->begin, e->end, expected, e->begin);
    expected = e->end;
    previous = e;
  }
  KILN_CHECK(expected == buffer.size(), "{}: the data buffer has {} bytes but the tensors cover only {}", what,
             buffer.size(), expected);

  NamedTensors out;
  for (const Entry& e : entries) {
    HostTensor t(e.dtype, e.shape);
    KILN_ASSERT(t.bytes() == e.end - e.begin, "size mismatch after validation");
    if (t.bytes() > 0) std::memcpy(t.data(), buffer.data() + e.begin, t.bytes());
    if (e.dtype == DType::boolean) checkBools(what, e, t);
    out.emplace(e.name, std::move(t));
  }
  return out;
}

NamedTensors loadSafetensors(const std::string& path, Metadata* metadata) {
  std::vector<std::byte> bytes = readFileBytes(path);
  return parseSafetensors(bytes, "'" + path + "'", metadata);
}

NamedTensors loadSafetensors(const std::string& path) { return loadSafetensors(path, nullptr); }

std::vector<std::byte> serializeSafetensors(const NamedTensors& tensors, const Metadata& metadata) {
  std::vector<const std::pair<const std::string, HostTensor>*> order;
  for (const auto& kv : tensors) {
    KILN_CHECK(kv.first != "__metadata__", "cannot save a tensor named \"__metadata__\" (reserved by safetensors)");
    KILN_CHECK(kv.second.data() != nullptr, "cannot save tensor {}: it is a default-constructed HostTensor with no data",
               json::quote(kv.first));
    order.push_back(&kv);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtypeSize(a->second.dtype()) > dtypeSize(b->second.dtype());  // names already sorted by the map
  });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += json::quote(k) + ':' + json::quote(v);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const auto* kv : order) {
    const HostTensor& t = kv->second;
    if (header.size() > 1) header += ',';
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", json::quote(kv->first),
                          safetensorsDTypeName(t.dtype()), fmt::join(t.shape(), ","), offset, offset + t.bytes());
    offset += t.bytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  std::vector<std::byte> out(8 + header.size() + offset);
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::byte* data = out.data() + 8 + header.size();
  for (const auto* kv : order) {
    const HostTensor& t = kv->second;
    if (t.bytes() > 0) std::memcpy(data, t.data(), t.bytes());
    data += t.bytes();
  }
  return out;
}

void saveSafetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  std::vector<std::byte> bytes = serializeSafetensors(tensors, metadata);
  writeFileAtomically(path, bytes);
}

}  // namespace kiln::rt
