// Stands in for the MindSpore-internal header of this name, which the wheel's
// core/mindrt/include/actor/log.h includes but the wheel does not ship (its
// own source tree maps it to MindSpore's logging): the factory kernels'
// library (factory_kernels.cpp) reaches it through cpu_kernel.h.
#include "utils/log_adapter.h"
