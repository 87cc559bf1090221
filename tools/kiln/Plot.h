// SVG line charts for the command line (`kiln train --loss-curve`, `kiln bench --plot`): one file,
// no script, readable in any browser.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

struct Series {
  std::string name;
  std::string color;  // any SVG colour; empty: picked from a palette
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};

struct Chart {
  std::string title, xLabel, yLabel;
  bool logX = false, logY = false;  // logarithmic axes (points ≤ 0 are left out)
  std::vector<Series> series;
  /// A dashed vertical line with a label, e.g. the crossover batch size.
  std::optional<double> markerX;
  std::string markerLabel;
  int width = 800, height = 480;
};

/// The chart as a standalone SVG document: axes with ticks at 1-2-5 steps (powers of ten on log
/// axes), a polyline and dots per series, a legend, the title and labels.
std::string chartSvg(const Chart& chart);

}  // namespace kiln::cli
