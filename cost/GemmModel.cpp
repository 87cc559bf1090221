// kiln's packed CPU GEMM priced from the machine profile's probes (GemmModel.h; docs/COST.md).
#include "cost/GemmModel.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace kiln::cost {
namespace {

using ir::OpKind;

constexpr int64_t kBf16PairsLeastK = 16;  // GemmBlocking.cpp kPairsLeastK: a shallower bf16 K widens to f32

int64_t roundUp(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/// Micro-tile of kiln's packed GEMM for a product of `m` rows at the vector width (Gemm.cpp's
/// blocking table; on AVX-512 GemmBlocking.cpp's tileShape: 8 × 48, or 10 × 32 / 12 × 32 where
/// those pad M to 3 % fewer rows, 8 × 32 for a transposed B of at most 64 rows and N a multiple
/// of 128).
std::pair<int64_t, int64_t> microTile(int64_t m, int lanes, int64_t n = 0, bool bTransposed = false) {
  if (lanes == 8) return {6, 16};
  if (lanes < 16) return {4, 8};
  std::pair<int64_t, int64_t> tile{8, 48};
  double best = static_cast<double>(roundUp(std::max<int64_t>(m, 1), 8));
  for (int64_t rows : {10, 12}) {
    const double padded = static_cast<double>(roundUp(std::max<int64_t>(m, 1), rows)) * 1.03;
    if (padded < best) tile = {rows, 32}, best = padded;
  }
  if (tile.first == 8 && bTransposed && m <= 64 && n % 128 == 0) tile.second = 32;
  return tile;
}

/// The fraction of the micro-tiles' work that lands in the result: the last rows are computed
/// padded to the tile's, the last columns to whole vectors (the micro-kernel has variants one and
/// two vectors narrower for the N edge: GemmKernels.cpp's `cols` kernels).
double tileUse(int64_t m, int64_t n, int lanes) {
  const int64_t mr = microTile(m, lanes).first;
  return static_cast<double>(m * n) / static_cast<double>(roundUp(m, mr) * roundUp(n, lanes));
}

GemmLayout layoutOf(std::string_view layout) {
  return {layout.size() == 2 && layout[0] == 't', layout.size() == 2 && layout[1] == 't'};
}

}  // namespace

GemmLayout layoutOf(const kernels::GemmForm& f) {
  const std::optional<kernels::Strides> a = kernels::stridesOf(f, true), b = kernels::stridesOf(f, false);
  return {a && a->k != 1, b && !b->rowsContiguous()};
}

/// kiln's packed GEMM as the profile measured it (MeasureCpu.cpp). A product of `batch` times
/// m×n×k on P GFLOP/s (the peak of the t threads it runs on) takes
///
///     T = δ + cI·items/t + 2·batch·m·n·k / (P · tileUse(m, n)) · (c0 + cM/mb + cN/nb + cK/k + cB·[Bᵀ]/mb + cA·[Aᵀ]/nb)
///
/// c0 is the micro-kernel's inverse efficiency; the next three are overheads per flop that fall
/// with the reuse of what they pay for: packing B is shared by the rows of an M block (mb),
/// packing A by the columns of an N block (nb), a micro-tile's load, store and hand-off by its
/// k-deep loop (mb, nb and the items as Gemm.cpp blocks the product for the threads); cB and cA
/// price a transposing packing of B or A, shared the same way; cI is the cost of a work item
/// (claiming it, its scratch, handing its tile to the epilogue), δ the call's; tileUse charges the
/// padded edge tiles. T·P·tileUse/flops is linear in the eight coefficients, so they are fitted by
/// non-negative least squares on relative error to the profile's matmul probes (squares, a shallow
/// K, a short M, a narrow N, a batch of small products, transposed operands). A convolution form
/// then gets its measured time against this model's for its GEMM form as a factor (packing
/// through windows costs more).
struct GemmModel::Impl {
 public:
  explicit Impl(const CpuProfile& cpu) : cpu_(cpu) {
    std::vector<const GemmPoint*> points;
    for (const GemmPoint& g : cpu.gemm)
      if (g.op == "matmul" && g.dtype == "f32" && g.micros > 0) points.push_back(&g);
    fit(points);
    for (const GemmPoint& g : cpu.gemm) {
      if (g.micros <= 0) continue;
      const double f = g.micros / micros(g.batch, g.m, g.n, g.k, layoutOf(g.layout));
      if (g.op == "matmul") {
        if (g.dtype == "bf16") bf16_.push_back({flopsOf(g.batch, g.m, g.n, g.k), std::clamp(f, 0.05, 2.0), g.m});
      } else {
        factors_.push_back({g.op, g.dtype, std::clamp(f, g.dtype == "f32" ? 0.5 : 0.05, 20.0)});
      }
    }
    std::sort(bf16_.begin(), bf16_.end(), [](const Bf16Point& x, const Bf16Point& y) { return x.flops < y.flops; });
  }

  /// bf16 matmul time over the f32 model's for a product of `flops`: the bf16 squares' factors
  /// interpolated in log(flops), the nearest one's outside them (1 without bf16 probes). Small
  /// products gain far less than large ones (packing pairs, the tiles' configuration and C round
  /// trips): on the Xeon with AMX, 64³ 0.30× and 1024³ 0.16–0.19×.
  double bf16Factor(double flops) const {
    if (bf16_.empty()) return 1;
    if (flops <= bf16_.front().flops) return bf16_.front().factor;
    if (flops >= bf16_.back().flops) return bf16_.back().factor;
    size_t i = 1;
    while (bf16_[i].flops < flops) ++i;
    const Bf16Point &lo = bf16_[i - 1], &hi = bf16_[i];
    const double t = std::log(flops / lo.flops) / std::log(hi.flops / lo.flops);
    return lo.factor + t * (hi.factor - lo.factor);
  }

  /// The fitted coefficients, the convolution factors and each probe against the fit.
  std::string text() const {
    std::string out = fmt::format(
        "  gemm model: c0 {:.3f} (micro-kernel at {:.0f} % of peak), cM {:.2f}, cN {:.2f}, cK {:.2f}, cBᵀ {:.2f}, "
        "cAᵀ {:.2f}, item {:.2f} µs, call {:.2f} µs\n",
        c_[0], 100 / c_[0], c_[1], c_[2], c_[3], c_[6], c_[7], c_[4], c_[5]);
    out += "  convolution factors:";
    for (const ConvFactor& c : factors_)
      out += fmt::format(" {}{} {:.2f}×", c.op, c.dtype == "f32" ? "" : " " + c.dtype, c.factor);
    out += "; bf16 matmuls";
    if (bf16_.empty()) out += " 1× (no bf16 probes)";
    for (const Bf16Point& b : bf16_) out += fmt::format(" {:.2f}× at {}³", b.factor, b.size);
    out += "\n  probes, measured against the model:";
    for (const GemmPoint& g : cpu_.gemm)
      if (g.op == "matmul" && g.dtype == "f32")
        out += fmt::format(" {}{}x{}x{}{} {:+.0f} %;", g.batch > 1 ? fmt::format("{}·", g.batch) : "", g.m, g.n, g.k,
                           layoutText(g.layout), 100 * (g.micros / micros(g.batch, g.m, g.n, g.k, layoutOf(g.layout)) - 1));
    return out + "\n";
  }

  /// Microseconds of a contraction `op` in GEMM form batch × m×n×k with operands of `dtype`. A
  /// bf16 matmul takes the bf16 squares' factor at its size; a convolution its form's probe in its
  /// dtype, else (a profile before format 6: no bf16 convolution probes) its f32 probe, as f32. A
  /// bf16 K under kBf16PairsLeastK is widened to f32 by the backend, and priced so.
  double micros(ir::OpKind op, DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, GemmLayout layout) const {
    const double t = micros(batch, m, n, k, op == OpKind::MatMul ? layout : GemmLayout{});
    const bool bf16 = dtype == DType::bf16 && k >= kBf16PairsLeastK;
    if (op == OpKind::MatMul) return bf16 ? t * bf16Factor(flopsOf(batch, m, n, k)) : t;
    const std::string_view name = ir::opInfo(op).name;
    const ConvFactor* f32 = nullptr;
    for (const ConvFactor& c : factors_) {
      if (c.op != name) continue;
      if (c.dtype == (bf16 ? "bf16" : "f32")) return t * c.factor;
      if (c.dtype == "f32") f32 = &c;
    }
    return f32 ? t * f32->factor : t;
  }

 private:
  static constexpr size_t kTerms = 8;
  using Terms = std::array<double, kTerms>;

  int threadsFor(double flops) const { return flops >= kGemmParallelFlops ? cpu_.identity.threads : 1; }
  static double flopsOf(int64_t batch, int64_t m, int64_t n, int64_t k) {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }

  struct Blocking {
    int64_t mb, nb, items;
  };
  /// Gemm.cpp's blocking of a product: the M and N block sizes after the split that gives every
  /// thread work (at least 4 items, an even number below 16), B blocks narrowed to stay packed over
  /// all of K; padded to whole micro-tiles, as the packed panels are.
  Blocking blocks(int64_t batch, int64_t m, int64_t n, int64_t k, GemmLayout layout) const {
    auto [mr, nr] = microTile(m, cpu_.f32Lanes, n, layout.b);
    auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
    auto evenBlock = [&](int64_t size, int64_t most, int64_t unit) {
      return size == 0 ? unit : roundUp(ceilDiv(size, ceilDiv(size, most)), unit);
    };
    int64_t mb = evenBlock(m, 144, mr), nb = evenBlock(n, 512, nr);
    const int64_t nbFits = (int64_t{4} << 20) / 4 / std::max<int64_t>(k, 1) / nr * nr;
    if (nbFits >= std::min<int64_t>(nb, 128) && nbFits < nb) nb = evenBlock(n, nbFits, nr);
    auto items = [&] { return batch * ceilDiv(m, mb) * ceilDiv(n, nb); };
    if (flopsOf(batch, m, n, k) >= kGemmParallelFlops) {
      while (items() < 4 || (items() < 16 && items() % 2 != 0)) {
        const bool splitN = nb / nr >= mb / mr;
        int64_t& block = splitN ? nb : mb;
        const int64_t size = splitN ? n : m;
        const int64_t smaller = roundUp(ceilDiv(size, 2 * ceilDiv(size, block)), splitN ? nr : mr);
        if (smaller >= block) break;
        block = smaller;
      }
    }
    return {roundUp(std::min(mb, m), mr), roundUp(std::min(nb, n), nr), items()};
  }
  /// T·P·tileUse/flops per µs of the per-call and per-item costs.
  double scale(int64_t batch, int64_t m, int64_t n, int64_t k) const {
    const double flops = flopsOf(batch, m, n, k);
    return cpu_.peak(threadsFor(flops)) * 1e3 * tileUse(m, n, cpu_.f32Lanes) / flops;
  }
  /// The regressors of one product: T·P·tileUse/flops = c · x.
  Terms features(int64_t batch, int64_t m, int64_t n, int64_t k, GemmLayout layout) const {
    const Blocking b = blocks(batch, m, n, k, layout);
    const double s = scale(batch, m, n, k);
    const double t = threadsFor(flopsOf(batch, m, n, k));
    return {1.0,
            1.0 / static_cast<double>(b.mb),
            1.0 / static_cast<double>(b.nb),
            1.0 / static_cast<double>(k),
            static_cast<double>(b.items) / t * s,
            s,
            layout.b ? 1.0 / static_cast<double>(b.mb) : 0.0,
            layout.a ? 1.0 / static_cast<double>(b.nb) : 0.0};
  }
  double micros(int64_t batch, int64_t m, int64_t n, int64_t k, GemmLayout layout) const {
    if (flopsOf(batch, m, n, k) <= 0) return 0;  // an empty product: only the call (its kernel's overhead)
    const Terms x = features(batch, m, n, k, layout);
    double y = 0;
    for (size_t i = 0; i < kTerms; ++i) y += c_[i] * x[i];
    return y / scale(batch, m, n, k);
  }
  /// Least squares on relative error with every coefficient at least 0 (Lawson and Hanson's
  /// active-set method): a term enters the fit while the residual still pulls it up, and one that
  /// a step would push below 0 leaves it again. Dropping every term that a plain least-squares fit
  /// makes negative at once left the micro-kernel term alone on this Xeon's probes (errors from
  /// −22 to +47 %).
  void fit(const std::vector<const GemmPoint*>& points) {
    // The relative-error system: row x/y against 1 for every probe, columns scaled to unit length.
    std::vector<Terms> rows;
    for (const GemmPoint* g : points) {
      const Terms x = features(g->batch, g->m, g->n, g->k, layoutOf(g->layout));
      const double y = g->micros * scale(g->batch, g->m, g->n, g->k);
      if (!(y > 0)) continue;
      Terms r;
      for (size_t i = 0; i < kTerms; ++i) r[i] = x[i] / y;
      rows.push_back(r);
    }
    Terms norm{};
    for (const Terms& r : rows)
      for (size_t i = 0; i < kTerms; ++i) norm[i] += r[i] * r[i];
    for (double& v : norm) v = std::sqrt(v);
    for (Terms& r : rows)
      for (size_t i = 0; i < kTerms; ++i) r[i] = norm[i] > 0 ? r[i] / norm[i] : 0;
    // Least squares over the passive terms (the others held at 0).
    auto solvePassive = [&](const std::array<bool, kTerms>& passive) {
      double a[kTerms][kTerms + 1] = {};
      for (const Terms& r : rows)
        for (size_t i = 0; i < kTerms; ++i) {
          for (size_t j = 0; j < kTerms; ++j) a[i][j] += r[i] * r[j];
          a[i][kTerms] += r[i];
        }
      for (size_t i = 0; i < kTerms; ++i)
        if (!passive[i]) {
          for (size_t j = 0; j < kTerms; ++j) a[i][j] = a[j][i] = 0;
          a[i][i] = 1;
          a[i][kTerms] = 0;
        }
      return solve(a);
    };
    std::array<bool, kTerms> passive{};
    Terms c{};
    for (size_t round = 0; round < 4 * kTerms; ++round) {
      // The gradient of the residual along each term held at 0; the steepest positive one enters.
      Terms w{};
      for (const Terms& r : rows) {
        double res = 1;
        for (size_t i = 0; i < kTerms; ++i) res -= r[i] * c[i];
        for (size_t i = 0; i < kTerms; ++i) w[i] += r[i] * res;
      }
      size_t enter = kTerms;
      for (size_t i = 0; i < kTerms; ++i)
        if (!passive[i] && w[i] > 1e-12 && (enter == kTerms || w[i] > w[enter])) enter = i;
      if (enter == kTerms) break;
      passive[enter] = true;
      for (size_t inner = 0; inner <= kTerms; ++inner) {
        const Terms s = solvePassive(passive);
        bool feasible = true;
        for (size_t i = 0; i < kTerms; ++i) feasible = feasible && (!passive[i] || s[i] > 0);
        if (feasible) {
          c = s;
          break;
        }
        // Step from c towards s as far as every passive term stays at least 0; those at 0 leave.
        double alpha = 1;
        for (size_t i = 0; i < kTerms; ++i)
          if (passive[i] && s[i] <= 0) alpha = std::min(alpha, c[i] / (c[i] - s[i]));
        for (size_t i = 0; i < kTerms; ++i) {
          c[i] += alpha * (s[i] - c[i]);
          if (passive[i] && c[i] <= 1e-12) passive[i] = false, c[i] = 0;
        }
      }
    }
    for (size_t i = 0; i < kTerms; ++i) c_[i] = norm[i] > 0 ? std::max(c[i], 0.0) / norm[i] : 0;
    if (c_[0] <= 0) c_[0] = 1;
  }
  /// Gauss-Jordan elimination with partial pivoting; a singular column gives 0.
  static Terms solve(double a[kTerms][kTerms + 1]) {
    for (size_t col = 0; col < kTerms; ++col) {
      size_t pivot = col;
      for (size_t r = col + 1; r < kTerms; ++r)
        if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
      for (size_t j = 0; j <= kTerms; ++j) std::swap(a[col][j], a[pivot][j]);
      if (std::abs(a[col][col]) < 1e-300) continue;
      for (size_t r = 0; r < kTerms; ++r) {
        if (r == col) continue;
        const double f = a[r][col] / a[col][col];
        for (size_t j = col; j <= kTerms; ++j) a[r][j] -= f * a[col][j];
      }
    }
    Terms c{};
    for (size_t i = 0; i < kTerms; ++i) c[i] = std::abs(a[i][i]) < 1e-300 ? 0 : a[i][kTerms] / a[i][i];
    return c;
  }

  const CpuProfile& cpu_;
  Terms c_{1, 0, 0, 0, 0, 0, 0, 0};
  struct ConvFactor {
    std::string op, dtype;
    double factor;
  };
  std::vector<ConvFactor> factors_;
  struct Bf16Point {
    double flops, factor;
    int64_t size;
  };
  std::vector<Bf16Point> bf16_;  // the bf16 squares' factors, by flops
};

GemmModel::GemmModel(const CpuProfile& cpu) : impl_(std::make_shared<const Impl>(cpu)) {}

double GemmModel::micros(ir::OpKind op, DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
                         GemmLayout layout) const {
  return impl_->micros(op, dtype, batch, m, n, k, layout);
}

std::string GemmModel::text() const { return impl_->text(); }

}  // namespace kiln::cost
