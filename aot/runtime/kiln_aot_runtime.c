/* The CPU runtime of a library written by `kiln aot` as one file, for standalone builds of the
 * runtime (aot/runtime/test includes it): the common part, safetensors, the CPU part, in the
 * order the generated NAME.c pastes them (see kiln_aot.h). Include kiln_aot.h first and define
 * _DEFAULT_SOURCE (or _GNU_SOURCE) before the first #include. */
#include "kiln_aot_common.c"
#include "kiln_aot_safetensors.c"
#include "kiln_aot_cpu.c"
