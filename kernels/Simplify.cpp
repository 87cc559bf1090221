#include "kernels/Simplify.h"

#include <algorithm>
#include <functional>

namespace kiln::kernels {
namespace {

void eraseDim(LoopNest& n, std::vector<int>& group, size_t d) {
  n.domain.erase(n.domain.begin() + static_cast<ptrdiff_t>(d));
  n.reduced.erase(n.reduced.begin() + static_cast<ptrdiff_t>(d));
  group.erase(group.begin() + static_cast<ptrdiff_t>(d));
  forEachAffine(n, [&](Affine& a) { a.coeff.erase(a.coeff.begin() + static_cast<ptrdiff_t>(d)); });
}

}  // namespace

LoopNest simplifyNest(const LoopNest& in, std::vector<int>& group) {
  LoopNest n = in;
  for (size_t d = n.domain.size(); d-- > 0;)
    if (n.domain[d] == 1) eraseDim(n, group, d);
  for (size_t d = n.domain.size(); d-- > 1;) {
    size_t e = d - 1;  // merge e into d
    if (n.reduced[e] != n.reduced[d] || group[e] != group[d]) continue;
    bool contiguous = true;
    forEachAffine(n, [&](Affine& a) { contiguous = contiguous && a.coeff[e] == a.coeff[d] * n.domain[d]; });
    if (!contiguous) continue;
    n.domain[d] *= n.domain[e];
    eraseDim(n, group, e);
  }
  return n;
}

bool fullStoresReadReductions(const LoopNest& nest) {
  std::vector<int8_t> reads(nest.exprs.size(), -1);  // memo: -1 unknown
  std::function<bool(int32_t)> readsReduced = [&](int32_t e) {
    if (reads[e] < 0) {
      const Expr& x = nest.exprs[e];
      reads[e] = x.kind == Expr::Kind::Reduced || std::any_of(x.args.begin(), x.args.end(), readsReduced);
    }
    return reads[e] == 1;
  };
  return std::any_of(nest.stores.begin(), nest.stores.end(),
                     [&](const Store& st) { return !st.outer && readsReduced(st.expr); });
}

}  // namespace kiln::kernels
