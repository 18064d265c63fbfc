// Stand-in for the closed CPU-debug header of the same name: `bfloat16_t` is
// declared in bnb_stub_types.h (included by stub_def.h).
#ifndef BNB_API_CHECK_KERNEL_BF16_H
#define BNB_API_CHECK_KERNEL_BF16_H
#include "stub_def.h"
#endif
