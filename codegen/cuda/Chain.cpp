#include "codegen/cuda/Chain.h"

#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>

namespace kiln::cuda {

namespace {

constexpr const char* kEntryHead = "extern \"C\" __global__ void __launch_bounds__(";
/// Static shared memory of a chain, which each phase takes in turn (a slice per group).
constexpr int64_t kChainSharedBytes = 48 << 10;
/// Named barriers per block: 16, the block's own (0) and one per group.
constexpr int kMaxGroups = 15;

size_t count(const std::string& s, const std::string& what, size_t from = 0, size_t to = std::string::npos) {
  size_t n = 0;
  to = std::min(to, s.size());
  for (size_t at = s.find(what, from); at != std::string::npos && at + what.size() <= to; at = s.find(what, at + 1)) ++n;
  return n;
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

/// An entry point's text in a kernel's code: the header line `extern "C" __global__ void
/// __launch_bounds__(N) ENTRY(PARAMS) {` at [begin, bodyBegin) and its body up to the closing brace
/// at column 0, [bodyBegin, end).
struct EntryText {
  size_t begin = 0, bodyBegin = 0, end = 0;
  std::vector<std::string> paramTypes;  // "const float*", one per parameter
  std::string params;
};

std::optional<EntryText> findEntry(const std::string& code, const std::string& entry) {
  const size_t name = code.find(") " + entry + "(");
  if (name == std::string::npos) return std::nullopt;
  EntryText e;
  e.begin = code.rfind('\n', name);
  e.begin = e.begin == std::string::npos ? 0 : e.begin + 1;
  if (code.compare(e.begin, std::string_view(kEntryHead).size(), kEntryHead) != 0) return std::nullopt;
  const size_t open = name + entry.size() + 2;
  const size_t lineEnd = code.find('\n', open);
  if (lineEnd == std::string::npos || code.compare(lineEnd - 3, 3, ") {") != 0) return std::nullopt;
  e.params = code.substr(open + 1, lineEnd - 3 - open - 1);
  e.bodyBegin = lineEnd + 1;
  const size_t close = code.find("\n}\n", lineEnd);
  if (close == std::string::npos) return std::nullopt;
  e.end = close + 3;
  for (size_t at = 0; at <= e.params.size();) {
    size_t comma = e.params.find(", ", at);
    if (comma == std::string::npos) comma = e.params.size();
    const std::string p = e.params.substr(at, comma - at);
    const size_t space = p.rfind(' ');
    if (space == std::string::npos) return std::nullopt;
    e.paramTypes.push_back(p.substr(0, space));
    at = comma + 2;
  }
  return e;
}

int64_t typeBytes(const std::string& t) {
  static const std::map<std::string, int64_t> sizes = {
      {"float", 4}, {"double", 8}, {"int", 4}, {"unsigned", 4}, {"unsigned int", 4}, {"long long", 8},
      {"unsigned long long", 8}, {"unsigned short", 2}, {"short", 2}, {"bool", 1}, {"__half", 2},
      {"__nv_bfloat16", 2}, {"char", 1}, {"unsigned char", 1}};
  auto it = sizes.find(t);
  return it == sizes.end() ? -1 : it->second;
}

/// The __shared__ arrays of `body`: the bytes of one group's slice of the chain's shared memory
/// (each array at a multiple of 16 bytes), or -1 when one is not a plain array of constant size.
/// With `place`, each declaration becomes a reference into the group's slice of `kiln_smem`.
int64_t sharedSlice(std::string& body, bool place) {
  static const std::regex decl(R"(^( *)__shared__ (?:__align__\(\d+\) )?([A-Za-z_][A-Za-z_0-9 ]*?) ([A-Za-z_]\w*)((?:\[\d+\])+);$)");
  std::string out;
  int64_t offset = 0;
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < body.size()) {
    size_t nl = body.find('\n', at);
    if (nl == std::string::npos) nl = body.size();
    std::string line = body.substr(at, nl - at);
    if (line.find("__shared__") != std::string::npos) {
      std::smatch m;
      if (!std::regex_match(line, m, decl)) return -1;
      int64_t bytes = typeBytes(m[2]);
      if (bytes < 0) return -1;
      const std::string dims = m[4];
      for (size_t d = dims.find('['); d != std::string::npos; d = dims.find('[', d + 1))
        bytes *= std::stoll(dims.substr(d + 1));
      line = fmt::format("{}auto& {} = *reinterpret_cast<{} (*){}>(kiln_smem + kiln_slice + {});", std::string(m[1]),
                         std::string(m[3]), std::string(m[2]), dims, offset);
      offset += (bytes + 15) / 16 * 16;
    }
    out += line;
    if (nl < body.size()) out += '\n';
    at = nl + 1;
  }
  if (place) body = std::move(out);
  return offset;
}

/// One launch of a chain: its layout step, the entry's text, its groups and rounds.
struct Phase {
  const StepLayout* step = nullptr;
  EntryText text;
  int groups = 1;
  bool shared = false;  // has __shared__ arrays: a barrier between its virtual blocks
  int64_t slice = 0;    // their bytes, each group's slice of the chain's shared memory
};

/// A kernel as a chain member: its code rewritten (entries → phase functions) and its phases.
struct Member {
  size_t kernel = 0;
  std::string code;
  std::vector<Phase> phases;
  int64_t sharedBytes = 0;  // of the chain's shared memory, for its phase that takes the most
};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The kernel `ki` as a chain member, or nothing when it cannot be one (see Chain.h).
std::optional<Member> asMember(const ProgramLayout& L, size_t ki, const std::vector<const StepLayout*>& steps) {
  const kernels::Kernel& k = L.kernels[ki];
  if (steps.empty() || k.flops > kChainMaxFlops || k.bytesRead + k.bytesWritten > kChainMaxBytes) return std::nullopt;
  Member m;
  m.kernel = ki;
  const std::string& code = L.rendered[ki].code;
  const uint32_t block = steps.front()->block[0];
  for (const StepLayout* s : steps) {
    if (s->kind != Step::Kind::Launch || s->sharedBytes != 0 || s->grid[1] != 1 || s->grid[2] != 1 ||
        s->block[1] != 1 || s->block[2] != 1 || s->block[0] != block || block % 32 != 0 || block > kChainThreads)
      return std::nullopt;
    std::optional<EntryText> t = findEntry(code, s->entry);
    if (!t || t->paramTypes.size() != s->args.size()) return std::nullopt;
    Phase p;
    p.step = s;
    p.text = *t;
    std::string body = code.substr(t->bodyBegin, t->end - t->bodyBegin);
    p.slice = sharedSlice(body, false);
    if (p.slice < 0 || p.slice > kChainSharedBytes) return std::nullopt;
    p.groups = static_cast<int>(std::min<int64_t>(
        {kMaxGroups, kChainThreads / block, s->grid[0], p.slice ? kChainSharedBytes / p.slice : kMaxGroups}));
    if (ceilDiv(s->grid[0], p.groups) > kChainMaxRounds) return std::nullopt;
    m.sharedBytes = std::max(m.sharedBytes, p.groups * p.slice);
    m.phases.push_back(std::move(p));
  }
  // Outside its entries' bodies the code may not depend on the block (helper functions take it
  // as a parameter); nowhere may it use another dimension or dynamic shared memory.
  for (const char* word : {"blockIdx", "gridDim", "__syncthreads", "__shared__"}) {
    size_t inside = 0;
    for (const Phase& p : m.phases) inside += count(code, word, p.text.bodyBegin, p.text.end);
    if (count(code, word) != inside) return std::nullopt;
  }
  for (const char* word : {"threadIdx.y", "threadIdx.z", "blockIdx.y", "blockIdx.z", "gridDim.y", "gridDim.z",
                           "blockDim", "extern __shared__", "kiln_bx", "kiln_gx", "kiln_grp", "kiln_smem", "kiln_slice"})
    if (count(code, word) != 0) return std::nullopt;
  // Rewrite the entries from the last in the code (offsets stay valid; an entry launched twice
  // is not rewritten twice: not chained), then the thread index everywhere.
  std::vector<Phase*> byPosition;
  for (Phase& p : m.phases) byPosition.push_back(&p);
  std::sort(byPosition.begin(), byPosition.end(), [](const Phase* a, const Phase* b) { return a->text.begin > b->text.begin; });
  for (size_t i = 1; i < byPosition.size(); ++i)
    if (byPosition[i]->text.begin == byPosition[i - 1]->text.begin) return std::nullopt;
  std::string out = code;
  for (Phase* q : byPosition) {
    Phase& p = *q;
    std::string body = code.substr(p.text.bodyBegin, p.text.end - p.text.bodyBegin);
    const size_t syncs = count(body, "__syncthreads");
    p.shared = count(body, "__shared__") != 0;
    // A thread that returns early would miss the barriers its group waits at.
    if ((syncs != 0 || p.shared) && count(body, "return") != 0) return std::nullopt;
    sharedSlice(body, true);
    replaceAll(body, "blockIdx.x", "kiln_bx");
    replaceAll(body, "gridDim.x", "kiln_gx");
    replaceAll(body, "__syncthreads()", fmt::format("kiln_sync(kiln_grp + 1, {})", block));
    const std::string header = fmt::format(
        "static __device__ __noinline__ void {}_phase(const unsigned kiln_bx, const unsigned kiln_gx, const unsigned "
        "kiln_grp, {}) {{\n{}",
        p.step->entry, p.text.params,
        p.slice ? fmt::format("  const unsigned kiln_slice = kiln_grp * {};\n", p.slice) : "");
    out.replace(p.text.begin, p.text.end - p.text.begin, header + body);
  }
  if (block < static_cast<uint32_t>(kChainThreads)) replaceAll(out, "threadIdx.x", fmt::format("(threadIdx.x % {})", block));
  m.code = std::move(out);
  return m;
}

/// What every chain's code needs (once per translation unit): the group barrier and the chain's
/// shared memory, dynamic (the launch gives its size), which the phase functions (not inlined:
/// NVRTC's time stays linear in the phases) address as shared memory.
constexpr const char* kChainHelpers = R"(#if defined(KILN_DEVICE_CODE) && !defined(KILN_CHAIN_HELPERS)
#define KILN_CHAIN_HELPERS
// A barrier of the `n` threads of one group of a chain (named barrier `id`).
static __device__ __forceinline__ void kiln_sync(unsigned id, unsigned n) {
  asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(n) : "memory");
}
extern __shared__ __align__(16) unsigned char kiln_smem[];
#endif
)";

/// Builds the chain of `members` into L: its entry, its step (replacing theirs), its code.
void buildChain(ProgramLayout& L, std::vector<Member>& members, std::vector<StepLayout>& steps) {
  const size_t first = members.front().kernel;
  const std::string entry = L.rendered[first].name + "_chain";
  std::vector<Location> args;
  auto argOf = [&args](const Location& at) {
    auto it = std::find(args.begin(), args.end(), at);
    if (it == args.end()) it = args.insert(args.end(), at);
    return static_cast<size_t>(it - args.begin());
  };
  std::string body, names;
  size_t launches = 0;
  for (const Member& m : members) {
    names += (names.empty() ? "" : ", ") + L.rendered[m.kernel].name;
    for (const Phase& p : m.phases) {
      const StepLayout& s = *p.step;
      const uint32_t b = s.block[0], g = s.grid[0];
      std::string call;
      for (size_t a = 0; a < s.args.size(); ++a)
        call += fmt::format(", static_cast<{}>(p{})", p.text.paramTypes[a], argOf(s.args[a]));
      body += fmt::format("  // {}: {} block(s) of {} threads, {} at a time\n", s.entry, g, b, p.groups);
      const bool all = static_cast<int64_t>(p.groups) * b == kChainThreads;
      body += all ? "  {\n" : fmt::format("  if (threadIdx.x < {}) {{\n", p.groups * static_cast<int>(b));
      body += fmt::format("    const unsigned grp = threadIdx.x / {};\n", b);
      body += fmt::format("    for (unsigned v = grp; v < {}; v += {}) {{\n", g, p.groups);
      body += fmt::format("      {}_phase(v, {}, grp{});\n", s.entry, g, call);
      if (p.shared) body += fmt::format("      kiln_sync(grp + 1, {});\n", b);
      body += "    }\n  }\n  __syncthreads();\n";
      ++launches;
    }
  }
  std::string params;
  for (size_t a = 0; a < args.size(); ++a) params += fmt::format("{}void* p{}", a ? ", " : "", a);
  std::string code = kChainHelpers;
  for (const Member& m : members)
    code += (m.kernel == first ? "" : "\n// ---- " + L.rendered[m.kernel].name + " (in the chain) ----\n") + m.code;
  code += fmt::format("// chain: {} launches of {} as phases of one block of {} threads\n", launches, names, kChainThreads);
  int64_t shared = 0;
  for (const Member& m : members) shared = std::max(shared, m.sharedBytes);
  code += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}}}\n", kChainThreads, entry,
                      params, body);

  StepLayout chain;
  chain.kind = Step::Kind::Launch;
  chain.kernel = first;
  chain.entry = entry;
  chain.block = {static_cast<uint32_t>(kChainThreads), 1, 1};
  chain.sharedBytes = static_cast<uint32_t>(shared);
  chain.args = std::move(args);
  steps.push_back(std::move(chain));

  for (const Member& m : members) {
    L.rendered[m.kernel].code.clear();
    L.rendered[m.kernel].steps.clear();
  }
  RenderedKernel& holder = L.rendered[first];
  holder.code = std::move(code);
  Step st;
  st.kind = Step::Kind::Launch;
  st.launch.entry = entry;
  st.launch.block = {kChainThreads, 1, 1};
  st.launch.sharedBytes = static_cast<int32_t>(shared);
  holder.steps.push_back(std::move(st));
}

}  // namespace

bool foldUpdates(ProgramLayout& L) {
  if (L.updates.size() < 2 || L.kernels.empty()) return false;
  for (const ProgramLayout::UpdateCopy& u : L.updates)
    if (u.staged) return false;
  for (const Location& o : L.outputs)
    if (o.kind == Location::Kind::Param) return false;
  auto aligned = [](const Location& at, int64_t n) {
    return (at.kind != Location::Kind::Arena && at.kind != Location::Kind::Scratch) || at.offset % n == 0;
  };
  RenderedKernel& last = L.rendered.back();
  const std::string entry = last.name + "_updates";
  constexpr int kBlock = 256;
  std::string params, loops;
  StepLayout step;
  step.kind = Step::Kind::Launch;
  step.kernel = L.kernels.size() - 1;
  step.entry = entry;
  int64_t most = 0;
  for (size_t i = 0; i < L.updates.size(); ++i) {
    const ProgramLayout::UpdateCopy& u = L.updates[i];
    const Location param{Location::Kind::Param, u.param, 0};
    int64_t word = 1;
    for (int64_t w : {8, 4})
      if (u.bytes % w == 0 && aligned(u.value, w)) {
        word = w;
        break;
      }
    const char* type = word == 8 ? "unsigned long long" : word == 4 ? "unsigned int" : "unsigned char";
    params += fmt::format("{}const {}* s{}, {}* d{}", i ? ", " : "", type, i, type, i);
    loops += fmt::format("  for (long long i = t; i < {}; i += n) d{}[i] = s{}[i];\n", u.bytes / word, i, i);
    most = std::max(most, u.bytes / word);
    step.args.push_back(u.value);
    step.args.push_back(param);
  }
  // Four elements a thread of the longest copy, at least one block.
  const int64_t blocks = std::clamp<int64_t>(ceilDiv(most, kBlock * 4), 1, 1024);
  step.grid = {static_cast<uint32_t>(blocks), 1, 1};
  step.block = {kBlock, 1, 1};
  last.code += fmt::format(
      "// the parameter updates: {} copies in one launch\nextern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n"
      "  const long long t = static_cast<long long>(blockIdx.x) * {} + threadIdx.x, n = static_cast<long long>(gridDim.x) * "
      "{};\n{}}}\n",
      L.updates.size(), kBlock, entry, params, kBlock, kBlock, loops);
  Step st;
  st.kind = Step::Kind::Launch;
  st.launch.entry = entry;
  st.launch.grid = {blocks, 1, 1};
  st.launch.block = {kBlock, 1, 1};
  last.steps.push_back(std::move(st));
  L.steps.push_back(std::move(step));
  ++L.launches;
  L.updates.clear();
  L.source = programSource(L.rendered);
  return true;
}

int chainLaunches(ProgramLayout& L) {
  // Each kernel's steps (they are consecutive, in kernel order).
  std::vector<std::vector<const StepLayout*>> byKernel(L.kernels.size());
  for (const StepLayout& s : L.steps) byKernel[s.kernel].push_back(&s);
  std::vector<std::optional<Member>> member(L.kernels.size());
  for (size_t k = 0; k < L.kernels.size(); ++k) member[k] = asMember(L, k, byKernel[k]);

  std::vector<StepLayout> steps;
  int chains = 0;
  std::vector<Member> run;
  size_t runLaunches = 0;
  std::vector<Location> runArgs;  // the distinct buffers of the run: the chain's parameters
  auto newArgs = [&](const Member& m) {
    std::vector<Location> fresh;
    for (const Phase& p : m.phases)
      for (const Location& at : p.step->args)
        if (std::find(runArgs.begin(), runArgs.end(), at) == runArgs.end() &&
            std::find(fresh.begin(), fresh.end(), at) == fresh.end())
          fresh.push_back(at);
    return fresh;
  };
  auto flush = [&] {
    if (runLaunches >= 2) {
      buildChain(L, run, steps);
      ++chains;
    } else {
      for (const Member& m : run)
        for (const StepLayout* s : byKernel[m.kernel]) steps.push_back(*s);
    }
    run.clear();
    runLaunches = 0;
    runArgs.clear();
  };
  for (size_t k = 0; k < L.kernels.size(); ++k) {
    if (!member[k] || runLaunches + member[k]->phases.size() > kChainMaxLaunches ||
        runArgs.size() + newArgs(*member[k]).size() > kChainMaxArgs)
      flush();
    if (!member[k]) {
      for (const StepLayout* s : byKernel[k]) steps.push_back(*s);
      continue;
    }
    const std::vector<Location> fresh = newArgs(*member[k]);
    runArgs.insert(runArgs.end(), fresh.begin(), fresh.end());
    runLaunches += member[k]->phases.size();
    run.push_back(std::move(*member[k]));
  }
  flush();
  if (chains == 0) return 0;
  L.steps = std::move(steps);
  L.launches = 0;
  for (const StepLayout& s : L.steps) L.launches += s.kind == Step::Kind::Launch;
  L.source = programSource(L.rendered);
  return chains;
}

}  // namespace kiln::cuda
