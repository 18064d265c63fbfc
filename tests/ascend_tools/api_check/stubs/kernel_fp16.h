// Stand-in for the closed CPU-debug header of the same name: `half` is
// declared in bnb_stub_types.h (included by stub_def.h).
#ifndef BNB_API_CHECK_KERNEL_FP16_H
#define BNB_API_CHECK_KERNEL_FP16_H
#include "stub_def.h"
#endif
