#include "tools/kiln/Plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cli {

namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

/// "1.5k", "20", "0.001", "2M": short tick labels.
std::string tickLabel(double v) {
  double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v) const {  // → [0, 1]
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      for (double p = std::pow(10, std::floor(std::log10(lo))); p <= hi * 1.0001; p *= 10)
        if (p >= lo * 0.9999) out.push_back(p);
      if (out.size() < 3)  // a narrow log range: 1-2-5 steps too
        for (double p = std::pow(10, std::floor(std::log10(lo))); p <= hi; p *= 10)
          for (double m : {2.0, 5.0})
            if (p * m >= lo && p * m <= hi) out.push_back(p * m);
      std::sort(out.begin(), out.end());
      return out;
    }
    double span = hi - lo, raw = span / 6, mag = std::pow(10, std::floor(std::log10(raw)));
    double step = mag * (raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10);
    for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
};

Axis axisFor(const Chart& c, bool x) {
  Axis a;
  a.log = x ? c.logX : c.logY;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Series& s : c.series)
    for (auto [px, py] : s.points) {
      double v = x ? px : py;
      if (a.log && v <= 0) continue;
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
  if (x && c.markerX && (!a.log || *c.markerX > 0)) lo = std::min(lo, *c.markerX), hi = std::max(hi, *c.markerX);
  if (!std::isfinite(lo)) lo = a.log ? 1 : 0, hi = a.log ? 10 : 1;
  if (a.log) {
    if (hi <= lo) hi = lo * 10;
    a.lo = lo / 1.15, a.hi = hi * 1.15;
  } else {
    if (hi <= lo) hi = lo + 1;
    double pad = (hi - lo) * 0.05;
    a.lo = (!x && lo >= 0 && lo - pad < 0) ? 0 : lo - pad;
    a.hi = hi + pad;
  }
  return a;
}

}  // namespace

std::string chartSvg(const Chart& c) {
  size_t longest = 0;
  for (const Series& s : c.series) longest = std::max(longest, s.name.size());
  // The legend sits right of the plot: wide enough for the longest name at ~7 px per character.
  const double left = 80, right = std::max(170.0, 50 + 7.0 * static_cast<double>(longest)), top = 50, bottom = 60;
  const double w = c.width - left - 170, h = c.height - top - bottom;
  const int width = static_cast<int>(left + w + right);
  const Axis ax = axisFor(c, true), ay = axisFor(c, false);
  auto X = [&](double v) { return left + ax.map(v) * w; };
  auto Y = [&](double v) { return top + (1 - ay.map(v)) * h; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n"
      "<text x=\"{cx}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{title}</text>\n",
      fmt::arg("w", width), fmt::arg("h", c.height), fmt::arg("cx", left + w / 2), fmt::arg("title", escape(c.title)));
  for (double t : ax.ticks()) {
    double x = X(t);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e0e0e0\"/>\n"
                       "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                       x, top, top + h, top + h + 18, escape(tickLabel(t)));
  }
  for (double t : ay.ticks()) {
    double y = Y(t);
    svg += fmt::format("<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#e0e0e0\"/>\n"
                       "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       y, left, left + w, left - 6, y + 4, escape(tickLabel(t)));
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", left, top, w, h);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + w / 2,
                     top + h + 42, escape(c.xLabel));
  svg += fmt::format("<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
                     top + h / 2, escape(c.yLabel));
  if (c.markerX && (!ax.log || *c.markerX > 0)) {
    double x = X(*c.markerX);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\" "
                       "stroke-dasharray=\"6 4\"/>\n<text x=\"{3:.1f}\" y=\"{4:.1f}\" fill=\"#333\">{5}</text>\n",
                       x, top, top + h, x + 4, top + 14, escape(c.markerLabel));
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const std::string color = s.color.empty() ? kPalette[i % std::size(kPalette)] : s.color;
    std::string points;
    for (auto [px, py] : s.points) {
      if ((ax.log && px <= 0) || (ay.log && py <= 0) || !std::isfinite(px) || !std::isfinite(py)) continue;
      points += fmt::format("{:.1f},{:.1f} ", X(px), Y(py));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, points);
    if (s.points.size() <= 64)
      for (auto [px, py] : s.points)
        if ((!ax.log || px > 0) && (!ay.log || py > 0) && std::isfinite(px) && std::isfinite(py))
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", X(px), Y(py), color);
    double ly = top + 10 + 20.0 * static_cast<double>(i);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" stroke-width=\"3\"/>\n"
                       "<text x=\"{4:.1f}\" y=\"{5:.1f}\">{6}</text>\n",
                       left + w + 12, ly, left + w + 32, color, left + w + 38, ly + 4, escape(s.name));
  }
  return svg + "</svg>\n";
}

}  // namespace kiln::cli
