// A reader for numeric CSV files (plain or gzip): one row per line, fields separated by a
// delimiter, every field a number (as std::from_chars reads it, plus an optional leading '+';
// "nan" and "inf" included). Fields may be surrounded by spaces or double quotes. Blank lines are
// skipped; "\r\n" line ends are accepted. Every row must have the same number of fields.
#pragma once

#include "runtime/HostTensor.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

struct CsvOptions {
  bool header = false;   // the first non-blank line holds column names, not numbers
  char delimiter = ',';
};

struct CsvTable {
  std::vector<std::string> header;  // column names, when CsvOptions::header
  std::string source;               // what errors call it: "'PATH'" for a file
  std::vector<int64_t> lines;       // the line number of each row
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> values;  // row-major, rows * cols

  double at(int64_t row, int64_t col) const { return values[static_cast<size_t>(row * cols + col)]; }
  /// Columns [begin, end) of every row as a [rows, end - begin] tensor of `dtype`.
  HostTensor columns(int64_t begin, int64_t end, DType dtype) const;
  /// One column as a [rows] tensor; integer dtypes require every value to be an integer in range.
  HostTensor column(int64_t col, DType dtype) const;
};

/// Reads a CSV file; errors say "'PATH':LINE: ...", naming the field.
CsvTable readCsv(const std::string& path, const CsvOptions& options = {});
/// Parses CSV text; `what` names it in errors and `firstLine` is the line number of its first line.
CsvTable parseCsv(std::string_view text, std::string_view what, const CsvOptions& options = {}, int64_t firstLine = 1);

}  // namespace kiln::rt
