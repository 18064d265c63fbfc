// Stand-in for the closed CPU-debug header of the same name (SIMT side of
// the newer cores); our kernels use no SIMT API, so it is empty.
#ifndef BNB_API_CHECK_SIMT_STUB_H
#define BNB_API_CHECK_SIMT_STUB_H
#include "stub_def.h"
#endif
