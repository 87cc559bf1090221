#include "runtime/Csv.h"

#include "runtime/FileIO.h"
#include "support/Error.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace kiln::rt {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::vector<std::string_view> splitFields(std::string_view line, char delimiter) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t end = line.find(delimiter, start);
    fields.push_back(trim(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

// A shortened field for error messages, so a binary file fed by mistake does not flood the terminal.
std::string shown(std::string_view field) {
  std::string s(field.substr(0, 40));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return field.size() > 40 ? s + "..." : s;
}

}  // namespace

CsvTable parseCsv(std::string_view text, std::string_view what, const CsvOptions& options, int64_t firstLine) {
  CsvTable table;
  table.source = std::string(what);
  bool needHeader = options.header;
  int64_t lineNo = firstLine - 1;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;

    std::vector<std::string_view> fields = splitFields(line, options.delimiter);
    if (needHeader) {
      for (std::string_view f : fields) table.header.emplace_back(f);
      table.cols = static_cast<int64_t>(fields.size());
      needHeader = false;
      continue;
    }
    if (table.cols == 0) table.cols = static_cast<int64_t>(fields.size());
    KILN_CHECK(static_cast<int64_t>(fields.size()) == table.cols, "{}:{}: row has {} fields, expected {}{}", what,
               lineNo, fields.size(), table.cols, table.header.empty() ? " (as in the first row)" : " (as in the header)");
    for (size_t i = 0; i < fields.size(); ++i) {
      std::string_view f = fields[i];
      if (!f.empty() && f.front() == '+') f.remove_prefix(1);
      double v = 0;
      auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      // Out-of-range literals (1e999) parse to ±inf / 0 like strtod; anything else must be a whole number.
      KILN_CHECK(!f.empty() && end == f.data() + f.size() && (ec == std::errc() || ec == std::errc::result_out_of_range),
                 "{}:{}: field {} is not a number: '{}'", what, lineNo, i + 1, shown(fields[i]));
      if (ec == std::errc::result_out_of_range) v = std::strtod(std::string(f).c_str(), nullptr);  // from_chars leaves v unset
      table.values.push_back(v);
    }
    table.lines.push_back(lineNo);
    ++table.rows;
  }
  return table;
}

CsvTable readCsv(const std::string& path, const CsvOptions& options) {
  std::vector<std::byte> bytes = readMaybeGzipFile(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parseCsv(text, "'" + path + "'", options);
}

HostTensor CsvTable::columns(int64_t begin, int64_t end, DType dtype) const {
  KILN_CHECK(0 <= begin && begin <= end && end <= cols, "{}: columns [{}, {}) out of range for a table of {} columns",
             source, begin, end, cols);
  HostTensor t(dtype, {rows, end - begin});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = begin; c < end; ++c) t.set(r * (end - begin) + (c - begin), at(r, c));
  return t;
}

HostTensor CsvTable::column(int64_t col, DType dtype) const {
  KILN_CHECK(0 <= col && col < cols, "{}: column {} out of range for a table of {} columns", source, col, cols);
  HostTensor t(dtype, {rows});
  for (int64_t r = 0; r < rows; ++r) {
    double v = at(r, col);
    if (isInteger(dtype) || dtype == DType::boolean) {
      double lo = dtype == DType::i32 ? -2147483648.0 : dtype == DType::boolean ? 0 : -9223372036854775808.0;
      double hi = dtype == DType::i32 ? 2147483647.0 : dtype == DType::boolean ? 1 : 9223372036854775807.0;
      KILN_CHECK(std::isfinite(v) && v == std::floor(v) && v >= lo && v <= hi,
                 "{}:{}: field {} is not a valid {} value: {}", source, lines.empty() ? r + 1 : lines[static_cast<size_t>(r)],
                 col + 1, dtypeName(dtype), v);
    }
    t.set(r, v);
  }
  return t;
}

}  // namespace kiln::rt
