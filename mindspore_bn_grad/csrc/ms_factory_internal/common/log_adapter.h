// Stands in for the header of this name that the wheel's
// core/mindrt/include/actor/log.h includes when MindSpore is built without
// glog (USE_GLOG unset, as it is for us: the wheel ships no glog headers);
// the wheel itself is built with glog, where that file includes
// utils/log_adapter.h, so this does the same. Reached by the kernel-factory
// library (factory_kernels.cpp) through cpu_kernel.h.
#include "utils/log_adapter.h"
