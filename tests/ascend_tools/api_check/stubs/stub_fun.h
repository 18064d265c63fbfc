// Stand-in for the closed CPU-debug header of the same name: the intrinsic
// declarations live in bnb_stub_intrinsics.h (included by stub_def.h).
#ifndef BNB_API_CHECK_STUB_FUN_H
#define BNB_API_CHECK_STUB_FUN_H
#include "stub_def.h"
#endif
