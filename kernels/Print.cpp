#include "kernels/Kernel.h"

#include "ir/Printer.h"

#include <fmt/format.h>

namespace kiln::kernels {

namespace {

std::string affine(const Affine& a) {
  std::string s;
  for (size_t d = 0; d < a.coeff.size(); ++d) {
    if (a.coeff[d] == 0) continue;
    if (!s.empty()) s += " + ";
    s += a.coeff[d] == 1 ? fmt::format("i{}", d) : fmt::format("{}*i{}", a.coeff[d], d);
  }
  if (a.constant != 0 || s.empty()) s += s.empty() ? fmt::format("{}", a.constant) : fmt::format(" + {}", a.constant);
  return s;
}

std::string indexMap(const IndexMap& m) {
  std::string s = "[" + affine(m.index) + "]";
  for (const IndexMap::Bound& b : m.bounds) s += fmt::format(" if 0 <= {} < {}", affine(b.value), b.limit);
  if (!m.bounds.empty()) s += fmt::format(" else {}", m.padValue);
  return s;
}

std::string_view roleName(Buffer::Role r) {
  switch (r) {
    case Buffer::Role::Input: return "input";
    case Buffer::Role::Param: return "param";
    case Buffer::Role::Temp: return "temp";
    case Buffer::Role::Output: return "output";
    case Buffer::Role::Constant: return "constant";
  }
  return "?";
}

std::string expr(const Kernel& k, const LoopNest& n, const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Load: {
      const Load& l = n.loads[e.load];
      return fmt::format("load %{}{}", k.buffers[l.buffer].name, indexMap(l.map));
    }
    case Expr::Kind::Constant: return fmt::format("{}", e.value);
    case Expr::Kind::Coord: return fmt::format("({}) / {} % {}", affine(e.index), e.divisor, e.modulus);
    case Expr::Kind::Random:
      return fmt::format("random_{}(seed={}, counter={} + {})", e.normal ? "normal" : "uniform", e.seed, e.offset,
                         affine(e.index));
    case Expr::Kind::Reduced: return fmt::format("r{}", e.reduction);
    case Expr::Kind::Acc: return "acc";
    case Expr::Kind::Op: {
      std::vector<std::string> args;
      for (int32_t a : e.args) args.push_back(fmt::format("e{}", a));
      const ir::OpInfo& info = ir::opInfo(e.op);
      std::vector<std::string> attrs;
      for (size_t i = 0; i < info.attrs.size() && i < e.attrs.size(); ++i)
        attrs.push_back(fmt::format("{}={}", info.attrs[i].name, ir::printAttrValue(e.attrs[i])));
      return fmt::format("{}({}){}", info.name, fmt::join(args, ", "),
                         attrs.empty() ? "" : fmt::format(" {{{}}}", fmt::join(attrs, ", ")));
    }
  }
  return "?";
}

}  // namespace

std::string printKernel(const Kernel& k) {
  std::string out = fmt::format("kernel {} ({}): {:.0f} flops, {} bytes read, {} bytes written\n", k.name,
                                ir::kernelKindName(k.kind), k.flops, k.bytesRead, k.bytesWritten);
  for (const ir::Node* n : k.nodes)
    if (n->loc.known()) {
      out += fmt::format("  from {} ({})\n", n->loc.str(), n->info().name);
      break;
    }
  for (size_t i = 0; i < k.buffers.size(); ++i)
    out += fmt::format("  buffer b{} %{} : {} ({})\n", i, k.buffers[i].name, k.buffers[i].type.str(),
                       roleName(k.buffers[i].role));
  if (k.op) out += fmt::format("  op {} (dedicated implementation)\n", k.op->info().name);
  if (k.hasContraction) {
    const Contraction& c = k.contraction;
    out += fmt::format("  contraction {}(b{}, b{}) -> {}\n", ir::opName(c.op), c.a, c.b, c.result.str());
    // Operands read through a view of their buffer: the view's shape and the buffer index of its
    // element (i0, i1, …).
    auto view = [&](const char* name, int32_t buf, const ir::Shape& shape, const IndexMap& map) {
      const ir::TensorType& t = k.buffers[buf].type;
      if (shape != t.shape || !(map == rowMajorMap(shape)))
        out += fmt::format("    {} = view of b{} as {} at %{}{}\n", name, buf, ir::TensorType{t.dtype, shape}.str(),
                           k.buffers[buf].name, indexMap(map));
    };
    view("a", c.a, c.shapeA, c.mapA);
    view("b", c.b, c.shapeB, c.mapB);
  }
  for (const LoopNest& n : k.nests) {
    std::vector<std::string> dims;
    for (size_t d = 0; d < n.domain.size(); ++d)
      dims.push_back(fmt::format("i{} < {}{}", d, n.domain[d], n.reduced[d] ? " (reduced)" : ""));
    out += fmt::format("  loop [{}]\n", fmt::join(dims, ", "));
    for (size_t i = 0; i < n.exprs.size(); ++i)
      out += fmt::format("    e{} : {} = {}\n", i, dtypeName(n.exprs[i].dtype), expr(k, n, n.exprs[i]));
    for (size_t i = 0; i < n.reductions.size(); ++i)
      out += fmt::format("    r{} = {} over reduced dims of e{}\n", i, ir::opName(n.reductions[i].op),
                         n.reductions[i].body);
    for (const Store& s : n.stores)
      out += fmt::format("    store{} %{}{} = e{}\n", s.outer ? " (outer)" : "", k.buffers[s.buffer].name,
                         indexMap(s.map), s.expr);
  }
  return out;
}

}  // namespace kiln::kernels
