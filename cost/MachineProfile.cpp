// The machine profile's identity, JSON form, cache and text. The measurements are in
// MeasureCpu.cpp and MeasureGpu.cpp.
#include "cost/MachineProfile.h"

#include "codegen/cpu/Jit.h"
#include "runtime/Devices.h"
#include "runtime/Json.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#ifndef KILN_VERSION
#define KILN_VERSION "0.1"
#endif

namespace kiln::cost {
namespace {

namespace json = rt::json;

// ---- writing -------------------------------------------------------------------------------------

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "0"; }

std::string numbers(const std::vector<double>& v) {
  std::vector<std::string> s;
  for (double x : v) s.push_back(num(x));
  return fmt::format("[{}]", fmt::join(s, ", "));
}

std::string bandwidthJson(const std::vector<BandwidthPoint>& points) {
  std::vector<std::string> s;
  for (const BandwidthPoint& p : points) s.push_back(fmt::format("{{\"bytes\": {}, \"gbps\": {}}}", p.bytes, numbers(p.gbps)));
  return fmt::format("[\n      {}\n    ]", fmt::join(s, ",\n      "));
}

std::string gemmJson(const std::vector<GemmPoint>& points) {
  std::vector<std::string> s;
  for (const GemmPoint& p : points)
    s.push_back(fmt::format("{{\"op\": {}, \"batch\": {}, \"m\": {}, \"n\": {}, \"k\": {}, \"micros\": {}{}{}}}",
                            json::quote(p.op), p.batch, p.m, p.n, p.k, num(p.micros),
                            p.dtype == "f32" ? "" : ", \"dtype\": " + json::quote(p.dtype),
                            p.layout == "nn" ? "" : ", \"layout\": " + json::quote(p.layout)));
  return fmt::format("[\n      {}\n    ]", fmt::join(s, ",\n      "));
}

std::string gpuJson(const GpuProfile& g, const std::string& indent) {
  const std::string i = indent + "  ";
  std::string out = "{\n";
  out += fmt::format("{}\"name\": {},\n{}\"arch\": {},\n", i, json::quote(g.name), i, json::quote(g.arch));
  out += fmt::format("{}\"multiprocessors\": {},\n{}\"memory_bytes\": {},\n", i, g.multiprocessors, i, g.memoryBytes);
  out += fmt::format("{}\"peak_gflops\": {{\"f32\": {}, \"tf32\": {}, \"bf16\": {}, \"f16\": {}}},\n", i,
                     num(g.peakF32), num(g.peakTf32), num(g.peakBf16), num(g.peakF16));
  out += fmt::format("{}\"gemm_f32\": {},\n{}\"gemm_timing\": \"{}\",\n", i, gemmJson(g.gemmF32), i,
                     g.gemmInGraph ? "graph" : "stream");
  out += fmt::format("{}\"bandwidth_gbps\": {},\n", i, num(g.bandwidthGbps));
  out += fmt::format("{}\"launch_us\": {},\n{}\"graph_node_us\": {},\n{}\"graph_kernel_us\": {},\n{}\"graph_launch_us\": {},\n",
                     i, num(g.launchMicros), i, num(g.graphNodeMicros), i, num(g.graphKernelMicros), i,
                     num(g.graphLaunchMicros));
  out += fmt::format("{}\"h2d_gbps\": {},\n{}\"d2h_gbps\": {},\n{}\"transfer_us\": {},\n", i, num(g.h2dGbps), i,
                     num(g.d2hGbps), i, num(g.transferMicros));
  out += fmt::format("{}\"source\": {}\n{}}}", i, json::quote(g.source), indent);
  return out;
}

// ---- reading -------------------------------------------------------------------------------------

struct Reader {
  std::string_view what;

  const json::Value& member(const json::Value& v, std::string_view key) const {
    KILN_CHECK(v.isObject(), "{}: expected an object holding '{}', found {}", what, key, v.kindName());
    const json::Value* m = v.find(key);
    KILN_CHECK(m, "{}: missing member '{}'", what, key);
    return *m;
  }
  double number(const json::Value& v, std::string_view key) const {
    const json::Value& m = member(v, key);
    KILN_CHECK(m.isNumber(), "{}: '{}' must be a number, found {}", what, key, m.kindName());
    return std::strtod(m.text.c_str(), nullptr);
  }
  int64_t integer(const json::Value& v, std::string_view key) const {
    const json::Value& m = member(v, key);
    std::optional<int64_t> i = m.asInt64();
    KILN_CHECK(i, "{}: '{}' must be an integer", what, key);
    return *i;
  }
  std::string string(const json::Value& v, std::string_view key) const {
    const json::Value& m = member(v, key);
    KILN_CHECK(m.isString(), "{}: '{}' must be a string, found {}", what, key, m.kindName());
    return m.text;
  }
  const std::vector<json::Value>& array(const json::Value& v, std::string_view key) const {
    const json::Value& m = member(v, key);
    KILN_CHECK(m.isArray(), "{}: '{}' must be an array, found {}", what, key, m.kindName());
    return m.items;
  }
  std::vector<double> numbers(const json::Value& v, std::string_view key) const {
    std::vector<double> out;
    for (const json::Value& x : array(v, key)) {
      KILN_CHECK(x.isNumber(), "{}: '{}' must hold numbers", what, key);
      out.push_back(std::strtod(x.text.c_str(), nullptr));
    }
    return out;
  }
  std::vector<BandwidthPoint> bandwidth(const json::Value& v, std::string_view key) const {
    std::vector<BandwidthPoint> out;
    for (const json::Value& x : array(v, key)) out.push_back({integer(x, "bytes"), numbers(x, "gbps")});
    return out;
  }
  std::vector<GemmPoint> gemm(const json::Value& v, std::string_view key) const {
    std::vector<GemmPoint> out;
    for (const json::Value& x : array(v, key))
      out.push_back({integer(x, "m"), integer(x, "n"), integer(x, "k"), number(x, "micros"), string(x, "op"),
                     integer(x, "batch"), x.find("dtype") ? string(x, "dtype") : "f32",
                     x.find("layout") ? string(x, "layout") : "nn"});
    for (const GemmPoint& g : out)
      KILN_CHECK(g.layout == "nn" || g.layout == "nt" || g.layout == "tn" || g.layout == "tt",
                 "{}: a GEMM probe's layout is '{}' (expected nn, nt, tn or tt)", what, g.layout);
    return out;
  }
  GpuProfile gpu(const json::Value& v) const {
    GpuProfile g;
    g.name = string(v, "name");
    g.arch = string(v, "arch");
    g.multiprocessors = static_cast<int>(integer(v, "multiprocessors"));
    g.memoryBytes = static_cast<uint64_t>(integer(v, "memory_bytes"));
    const json::Value& peak = member(v, "peak_gflops");
    g.peakF32 = number(peak, "f32");
    g.peakTf32 = number(peak, "tf32");
    g.peakBf16 = number(peak, "bf16");
    g.peakF16 = number(peak, "f16");
    g.gemmF32 = gemm(v, "gemm_f32");
    if (const json::Value* timing = v.find("gemm_timing")) {
      KILN_CHECK(timing->isString() && (timing->text == "graph" || timing->text == "stream"),
                 "{}: GPU '{}': gemm_timing must be \"graph\" or \"stream\"", what, g.name);
      g.gemmInGraph = timing->text == "graph";
    }
    g.bandwidthGbps = number(v, "bandwidth_gbps");
    g.launchMicros = number(v, "launch_us");
    g.graphNodeMicros = number(v, "graph_node_us");
    if (v.find("graph_kernel_us")) g.graphKernelMicros = number(v, "graph_kernel_us");
    g.graphLaunchMicros = number(v, "graph_launch_us");
    g.h2dGbps = number(v, "h2d_gbps");
    g.d2hGbps = number(v, "d2h_gbps");
    g.transferMicros = number(v, "transfer_us");
    g.source = string(v, "source");
    KILN_CHECK(g.peakF32 > 0 && g.bandwidthGbps > 0 && g.h2dGbps > 0 && g.d2hGbps > 0, "{}: GPU '{}' has a zero peak or bandwidth",
               what, g.name);
    return g;
  }
};

/// Linear interpolation of v (indexed by t - 1) at thread count t, clamped.
double atThreads(const std::vector<double>& v, int t) {
  if (v.empty()) return 0;
  return v[static_cast<size_t>(std::clamp(t, 1, static_cast<int>(v.size())) - 1)];
}

std::string nowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string sizeText(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

/// GB/s of `ladder` at a working set of `bytes` with t threads, interpolated in log(bytes).
double onLadder(const std::vector<BandwidthPoint>& ladder, int64_t bytes, int t) {
  if (ladder.empty()) return 1;
  auto at = [&](const BandwidthPoint& p) { return atThreads(p.gbps, t); };
  if (bytes <= ladder.front().bytes) return at(ladder.front());
  if (bytes >= ladder.back().bytes) return at(ladder.back());
  size_t i = 1;
  while (bytes > ladder[i].bytes) ++i;
  const double x0 = std::log(static_cast<double>(ladder[i - 1].bytes)), x1 = std::log(static_cast<double>(ladder[i].bytes));
  const double f = (std::log(static_cast<double>(bytes)) - x0) / (x1 - x0);
  return at(ladder[i - 1]) + f * (at(ladder[i]) - at(ladder[i - 1]));
}

}  // namespace

double CpuProfile::peak(int t) const { return atThreads(peakGflops, t); }

double CpuProfile::peakBf16(int t) const { return peakBf16Gflops.empty() ? 0 : atThreads(peakBf16Gflops, t); }

double CpuProfile::bandwidth(int64_t bytes, int t) const { return onLadder(triad, bytes, t); }

double CpuProfile::memoryBandwidth(int t) const {
  const std::vector<BandwidthPoint>& ladder = copy.empty() ? triad : copy;
  return ladder.empty() ? 1 : atThreads(ladder.back().gbps, t);
}

double CpuProfile::memoryMicros(int64_t readBytes, int64_t writtenBytes, int t) const {
  const int64_t set = std::max<int64_t>(readBytes + writtenBytes, 1);
  const double triadNs = 1.0 / std::max(onLadder(triad, set, t), 1e-9);  // ns per byte of a triad's mix
  if (read.empty()) return static_cast<double>(readBytes + writtenBytes) * triadNs * 1e-3;
  const double r = 1.0 / std::max(onLadder(read, set, t), 1e-9);
  // A triad moves 8 bytes read and 4 written per 12: 12·triadNs = 8·r + 4·w.
  const double w = std::max((12 * triadNs - 8 * r) / 4, 0.25 * r);
  return (static_cast<double>(readBytes) * r + static_cast<double>(writtenBytes) * w) * 1e-3;
}

double CpuProfile::opCost(std::string_view op) const {
  for (const auto& [name, ns] : opNanos)
    if (name == op) return ns;
  return 0;
}

CpuProfile bestOf(const CpuProfile& a, const CpuProfile& b) {
  KILN_CHECK(a.identity == b.identity && a.peakGflops.size() == b.peakGflops.size() && a.gemm.size() == b.gemm.size() &&
                 a.triad.size() == b.triad.size() && a.read.size() == b.read.size() && a.copy.size() == b.copy.size() &&
                 a.opNanos.size() == b.opNanos.size(),
             "cannot merge profiles of different machines or layouts");
  CpuProfile c = a;
  auto higher = [](std::vector<double>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) x[i] = std::max(x[i], y[i]);
  };
  higher(c.peakGflops, b.peakGflops);
  higher(c.peakBf16Gflops, b.peakBf16Gflops);
  for (auto [mine, theirs] : {std::pair{&c.triad, &b.triad}, std::pair{&c.copy, &b.copy}, std::pair{&c.read, &b.read}})
    for (size_t i = 0; i < mine->size(); ++i) higher((*mine)[i].gbps, (*theirs)[i].gbps);
  for (size_t i = 0; i < c.gemm.size(); ++i) c.gemm[i].micros = std::min(c.gemm[i].micros, b.gemm[i].micros);
  for (size_t i = 0; i < c.opNanos.size(); ++i) c.opNanos[i].second = std::min(c.opNanos[i].second, b.opNanos[i].second);
  c.reduceRowNanos = std::min(c.reduceRowNanos, b.reduceRowNanos);
  c.reduceElementNanos = std::min(c.reduceElementNanos, b.reduceElementNanos);
  c.kernelCallMicros = std::min(c.kernelCallMicros, b.kernelCallMicros);
  c.dispatchMicros = std::min(c.dispatchMicros, b.dispatchMicros);
  c.runMicros = std::min(c.runMicros, b.runMicros);
  return c;
}

CpuIdentity hostIdentity() {
  CpuIdentity id;
  id.model = rt::cpuInfo().model;
  if (id.model.empty()) id.model = "unknown cpu";
  id.threads = rt::ThreadPool::global().threads();
  cpu::Jit& jit = cpu::Jit::host();
  id.isa = jit.hasFeature("avx512f") ? "avx512" : jit.hasFeature("avx2") && jit.hasFeature("fma") ? "avx2" : "scalar";
  id.kilnVersion = KILN_VERSION;
  return id;
}

std::string layoutText(std::string_view layout) {
  if (layout == "nt") return " ABᵀ";
  if (layout == "tn") return " AᵀB";
  if (layout == "tt") return " AᵀBᵀ";
  return "";
}

std::string gpuProfileToJson(const GpuProfile& g) { return gpuJson(g, "") + "\n"; }

std::string profileToJson(const MachineProfile& p) {
  const CpuProfile& c = p.cpu;
  std::string out = "{\n";
  out += fmt::format("  \"format\": {},\n  \"measured_at\": {},\n  \"measure_seconds\": {},\n", p.format,
                     json::quote(p.measuredAt), num(p.measureSeconds));
  out += "  \"cpu\": {\n";
  out += fmt::format("    \"model\": {},\n    \"threads\": {},\n    \"isa\": {},\n    \"kiln_version\": {},\n",
                     json::quote(c.identity.model), c.identity.threads, json::quote(c.identity.isa),
                     json::quote(c.identity.kilnVersion));
  out += fmt::format("    \"f32_lanes\": {},\n    \"peak_gflops\": {},\n", c.f32Lanes, numbers(c.peakGflops));
  if (!c.peakBf16Gflops.empty()) out += fmt::format("    \"peak_bf16_gflops\": {},\n", numbers(c.peakBf16Gflops));
  out += fmt::format("    \"triad\": {},\n    \"copy\": {},\n    \"read\": {},\n", bandwidthJson(c.triad),
                     bandwidthJson(c.copy), bandwidthJson(c.read));
  out += fmt::format("    \"gemm\": {},\n", gemmJson(c.gemm));
  std::vector<std::string> ops;
  for (const auto& [name, ns] : c.opNanos) ops.push_back(fmt::format("{}: {}", json::quote(name), num(ns)));
  out += fmt::format("    \"op_ns\": {{{}}},\n", fmt::join(ops, ", "));
  out += fmt::format("    \"reduce_row_ns\": {},\n    \"reduce_element_ns\": {},\n", num(c.reduceRowNanos),
                     num(c.reduceElementNanos));
  out += fmt::format("    \"kernel_call_us\": {},\n    \"dispatch_us\": {},\n    \"run_us\": {}\n  }},\n",
                     num(c.kernelCallMicros), num(c.dispatchMicros), num(c.runMicros));
  std::vector<std::string> gpus;
  for (const GpuProfile& g : p.gpus) gpus.push_back("    " + gpuJson(g, "    "));
  out += gpus.empty() ? "  \"gpus\": []\n" : fmt::format("  \"gpus\": [\n{}\n  ]\n", fmt::join(gpus, ",\n"));
  return out + "}\n";
}

MachineProfile profileFromJson(std::string_view text, std::string_view what) {
  json::Value root = json::parse(text, what);
  Reader r{what};
  MachineProfile p;
  p.format = static_cast<int>(r.integer(root, "format"));
  KILN_CHECK(p.format >= kProfileFormatOldest && p.format <= kProfileFormat,
             "{}: profile format {}, this kiln reads formats {} to {}", what, p.format, kProfileFormatOldest,
             kProfileFormat);
  p.measuredAt = r.string(root, "measured_at");
  p.measureSeconds = r.number(root, "measure_seconds");
  const json::Value& c = r.member(root, "cpu");
  p.cpu.identity = {r.string(c, "model"), static_cast<int>(r.integer(c, "threads")), r.string(c, "isa"),
                    r.string(c, "kiln_version")};
  p.cpu.f32Lanes = static_cast<int>(r.integer(c, "f32_lanes"));
  p.cpu.peakGflops = r.numbers(c, "peak_gflops");
  if (c.find("peak_bf16_gflops")) p.cpu.peakBf16Gflops = r.numbers(c, "peak_bf16_gflops");
  p.cpu.triad = r.bandwidth(c, "triad");
  p.cpu.copy = r.bandwidth(c, "copy");
  p.cpu.read = r.bandwidth(c, "read");
  p.cpu.gemm = r.gemm(c, "gemm");
  const json::Value& ops = r.member(c, "op_ns");
  KILN_CHECK(ops.isObject(), "{}: 'op_ns' must be an object", what);
  for (const auto& [name, v] : ops.members) p.cpu.opNanos.emplace_back(name, r.number(ops, name));
  p.cpu.reduceRowNanos = r.number(c, "reduce_row_ns");
  p.cpu.reduceElementNanos = r.number(c, "reduce_element_ns");
  p.cpu.kernelCallMicros = r.number(c, "kernel_call_us");
  p.cpu.dispatchMicros = r.number(c, "dispatch_us");
  p.cpu.runMicros = r.number(c, "run_us");
  KILN_CHECK(!p.cpu.peakGflops.empty() && !p.cpu.triad.empty(), "{}: the CPU profile has no peak or no bandwidth", what);
  for (const json::Value& g : r.array(root, "gpus")) p.gpus.push_back(r.gpu(g));
  return p;
}

GpuProfile gpuProfileFromFile(const std::string& path) {
  const std::string text = readTextFile(path);
  json::Value root = json::parse(text, path);
  Reader r{path};
  if (root.find("gpus")) {
    // A whole machine profile: its first GPU, whatever the format of its CPU part (a GPU object of
    // an older format reads with its newer fields left unmeasured).
    const auto& gpus = r.array(root, "gpus");
    KILN_CHECK(!gpus.empty(), "{}: the machine profile has no GPU (it was measured on a machine without one)", path);
    GpuProfile g = r.gpu(gpus.front());
    if (g.source.empty()) g.source = path;
    return g;
  }
  GpuProfile g = r.gpu(root);
  if (g.source.empty()) g.source = path;
  return g;
}

std::string defaultProfilePath() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) return (fs::path(dir) / "machine.json").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/tmp") / ".cache" / "kiln" / "machine.json").string();
}

bool profileMatches(const MachineProfile& p, const CpuIdentity& id) {
  return p.format == kProfileFormat && p.cpu.identity == id;
}

MachineProfile machineProfile(const ProfileOptions& options) {
  const std::string path = options.path.empty() ? defaultProfilePath() : options.path;
  const CpuIdentity id = hostIdentity();
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  // A file there that is no machine profile at all (not a JSON object with a "cpu" entry: a model,
  // a typo'd path) is never replaced by one; an older or damaged profile is.
  bool mayReplace = true;
  if (std::filesystem::exists(path)) {
    std::string text;
    try {
      text = readTextFile(path);
    } catch (const Error&) {
    }
    const size_t first = text.find_first_not_of(" \t\r\n");
    mayReplace = first != std::string::npos && text[first] == '{' && text.find("\"cpu\"") != std::string::npos;
  }
  if (!options.remeasure && std::filesystem::exists(path)) {
    try {
      MachineProfile cached = profileFromJson(readTextFile(path), path);
      if (profileMatches(cached, id)) return cached;
      if (cached.format != kProfileFormat && cached.cpu.identity == id)
        say(fmt::format("{} is of profile format {}, and this kiln measures format {}: measuring again", path,
                        cached.format, kProfileFormat));
      else
        say(fmt::format("{} was measured on another machine ({}, {} threads, {}, kiln {}): measuring this one",
                        path, cached.cpu.identity.model, cached.cpu.identity.threads, cached.cpu.identity.isa,
                        cached.cpu.identity.kilnVersion));
    } catch (const Error& e) {
      say(fmt::format("cannot use {} ({}): measuring again", path, e.what()));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  MachineProfile p;
  p.measuredAt = nowUtc();
  p.cpu = measureCpu(options.progress);
  for (int round = 1; round < options.rounds; ++round) {
    say(fmt::format("cpu: round {} of {}", round + 1, options.rounds));
    p.cpu = bestOf(p.cpu, measureCpu(options.progress));
  }
  if (options.measureGpus) {
    std::string why;
    p.gpus = measureGpus(options.progress, &why);
    if (p.gpus.empty()) say("gpu: " + why);
  }
  p.measureSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& doubt : profileDoubts(p.cpu))
    say(fmt::format("warning: {}: another process may have shared the cores; measure again with `kiln profile "
                    "--remeasure` when the machine is quiet",
                    doubt));
  if (options.save && !mayReplace) {
    say(fmt::format("warning: not saving the profile: {} is there and is not a machine profile", path));
  } else if (options.save) {
    try {
      if (const auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
        std::filesystem::create_directories(dir);
      writeFileAtomically(path, profileToJson(p));
      say("saved " + path);
    } catch (const std::exception& e) {
      say(fmt::format("warning: cannot save the profile: {}", e.what()));
    }
  }
  return p;
}

std::vector<std::string> profileDoubts(const CpuProfile& c) {
  std::vector<std::string> doubts;
  for (size_t t = 1; t < c.peakGflops.size(); ++t)
    if (c.peakGflops[0] > 0 && c.peakGflops[t] < 0.75 * static_cast<double>(t + 1) * c.peakGflops[0])
      doubts.push_back(fmt::format("the {}-thread FMA peak is {:.2f} times the 1-thread one", t + 1,
                                   c.peakGflops[t] / c.peakGflops[0]));
  const double peak = c.peakGflops.empty() ? 0 : c.peak(c.identity.threads);  // the probes' threads
  if (c.f32Lanes >= 8 && peak > 0)
    for (const GemmPoint& g : c.gemm)
      if (g.square() && g.dtype == "f32" && g.m >= 256 && g.gflops() < kGemmDoubtFraction * peak)
        doubts.push_back(fmt::format("kiln's GEMM probe {}³ ran at {:.0f} % of the FMA peak", g.m,
                                     100 * g.gflops() / peak));
  return doubts;
}

std::string profileText(const MachineProfile& p) {
  const CpuProfile& c = p.cpu;
  std::string out = fmt::format("machine profile, measured {} in {:.1f} s\n", p.measuredAt, p.measureSeconds);
  out += fmt::format("cpu: {}, {} threads, {} ({} f32 lanes), kiln {}\n", c.identity.model, c.identity.threads,
                     c.identity.isa, c.f32Lanes, c.identity.kilnVersion);
  std::vector<std::string> peaks;
  for (size_t t = 0; t < c.peakGflops.size(); ++t) peaks.push_back(fmt::format("{}t {:.1f}", t + 1, c.peakGflops[t]));
  out += fmt::format("  fma peak GFLOP/s: {}\n", fmt::join(peaks, ", "));
  if (!c.peakBf16Gflops.empty()) {
    std::vector<std::string> bf16;
    for (size_t t = 0; t < c.peakBf16Gflops.size(); ++t)
      bf16.push_back(fmt::format("{}t {:.1f}", t + 1, c.peakBf16Gflops[t]));
    out += fmt::format("  bf16 peak GFLOP/s: {}\n", fmt::join(bf16, ", "));
  }
  auto ladder = [&](const char* name, const std::vector<BandwidthPoint>& pts) {
    out += fmt::format("  {} GB/s by working set:", name);
    for (const BandwidthPoint& b : pts) {
      std::vector<std::string> v;
      for (double g : b.gbps) v.push_back(fmt::format("{:.1f}", g));
      out += fmt::format("  {} [{}]", sizeText(b.bytes), fmt::join(v, " "));
    }
    out += "  (per thread count 1..N)\n";
  };
  ladder("triad", c.triad);
  ladder("copy", c.copy);
  ladder("read", c.read);
  out += "  kiln gemm (f32 unless said, GFLOP/s and % of the all-thread f32 peak):\n   ";
  for (const GemmPoint& g : c.gemm) {
    const std::string shape = (g.square() ? fmt::format("{}³", g.m)
                                   : fmt::format("{} {}{}x{}x{}", g.op, g.batch > 1 ? fmt::format("{}·", g.batch) : "",
                                                 g.m, g.n, g.k)) +
                              layoutText(g.layout) + (g.dtype == "f32" ? "" : " " + g.dtype);
    out += fmt::format(" {}: {:.1f} ({:.0f} %);", shape, g.gflops(), 100 * g.gflops() / c.peak(c.identity.threads));
  }
  out += "\n  elementwise ns per element beyond an add (1 thread):";
  for (const auto& [name, ns] : c.opNanos) out += fmt::format(" {} {:.2f}", name, ns);
  out += fmt::format("\n  row reduction: {:.1f} ns per row + {:.3f} ns per element\n", c.reduceRowNanos,
                     c.reduceElementNanos);
  out += fmt::format("  kernel call {:.2f} µs, thread-pool dispatch {:.2f} µs, Program::run {:.2f} µs\n",
                     c.kernelCallMicros, c.dispatchMicros, c.runMicros);
  for (const std::string& doubt : profileDoubts(c))
    out += fmt::format("  doubtful: {} (a busy machine? `kiln profile --remeasure`)\n", doubt);
  if (p.gpus.empty()) out += "gpu: none measured\n";
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    const GpuProfile& g = p.gpus[i];
    out += fmt::format("gpu {}: {} ({}, {} SMs, {:.1f} GiB)\n", i, g.name, g.arch, g.multiprocessors,
                       g.memoryBytes / double(1 << 30));
    out += fmt::format("  peak GFLOP/s: f32 {:.0f}, tf32 {:.0f}, bf16 {:.0f}, f16 {:.0f}\n", g.peakF32, g.peakTf32,
                       g.peakBf16, g.peakF16);
    out += fmt::format("  bandwidth {:.0f} GB/s; launch {:.2f} µs, graph node {:.2f} µs (a dependent small kernel {}), "
                       "graph launch {:.2f} µs\n",
                       g.bandwidthGbps, g.launchMicros, g.graphNodeMicros,
                       g.graphKernelMicros > 0 ? fmt::format("{:.2f} µs", g.graphKernelMicros) : "not measured",
                       g.graphLaunchMicros);
    out += fmt::format("  host->device {:.1f} GB/s, device->host {:.1f} GB/s, copy latency {:.1f} µs\n", g.h2dGbps,
                       g.d2hGbps, g.transferMicros);
  }
  return out;
}

}  // namespace kiln::cost
