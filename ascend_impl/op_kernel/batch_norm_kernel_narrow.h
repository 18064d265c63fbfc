// Narrowing of the kernel's API arguments. The Ascend C API takes burst
// counts and lengths, strides, repeat times and element counts as narrow
// integers (uint16_t blockCount of DataCopyExtParams, int32_t count of the
// vector instructions, ...); a wider value the kernel computes wraps silently
// when cast. Every such cast goes through Narrow<To>(value, "Intrinsic field"):
// on the device a plain static_cast; in the project's checking builds (the
// simulator and the real-API stand-ins, which both carry the rule table
// tests/ascend_tools/rules/bnb_rules.h) a value that does not fit stops the run
// at this call, naming the field and the unnarrowed value.
#ifndef BATCH_NORM_KERNEL_NARROW_H
#define BATCH_NORM_KERNEL_NARROW_H
#include <cstdint>
#include "kernel_operator.h"

namespace bnb {

#ifdef BNB_TOOLS_RULES_H  // a checking build: the rule table is in (through its kernel_operator.h)
template <typename To, typename From>
inline To Narrow(From value, const char *field, const char *file = __builtin_FILE(), unsigned line = __builtin_LINE())
{
    bnb_rules::Narrowing<To>(field, value, {file, line});
    return static_cast<To>(value);
}
#else
template <typename To, typename From>
__aicore__ inline To Narrow(From value, const char *)
{
    return static_cast<To>(value);
}
#endif

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_NARROW_H
