#include "support/FloatMode.h"

#include "support/Error.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define KILN_MXCSR 1
#endif

namespace kiln {
namespace {
constexpr uint32_t kDenormalBits = 0x8040;  // MXCSR: FTZ (bit 15) and DAZ (bit 6)
}  // namespace

Denormals denormalsFromEnvironment() {
  const char* text = std::getenv("KILN_DENORMALS");
  const std::string_view s = text ? text : "";
  if (s.empty() || s == "flush") return Denormals::Flush;
  if (s == "keep") return Denormals::Keep;
  KILN_THROW("KILN_DENORMALS is '{}': expected 'flush' (the default) or 'keep'", s);
}

uint32_t floatControl() {
#ifdef KILN_MXCSR
  return _mm_getcsr();
#else
  return 0;
#endif
}

void setFloatControl([[maybe_unused]] uint32_t control) {
#ifdef KILN_MXCSR
  _mm_setcsr(control);
#endif
}

void setFloatMode(uint32_t control) {
  const uint32_t now = floatControl();
  if ((now ^ control) & ~kFloatFlags) setFloatControl((control & ~kFloatFlags) | (now & kFloatFlags));
}

ScopedDenormals::ScopedDenormals(Denormals mode) : saved_(floatControl()) {
  setFloatMode(mode == Denormals::Flush ? saved_ | kDenormalBits : saved_ & ~kDenormalBits);
}

ScopedDenormals::~ScopedDenormals() { setFloatMode(saved_); }

}  // namespace kiln
