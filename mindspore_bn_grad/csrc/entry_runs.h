// The checked run of each operator on an aot-style call, shared by the entry
// points that reach it by different routes: MindSpore's ops.Custom aot ABI and
// the direct ctypes call (aot_entry.cpp), and MindSpore's CPU op plugin
// (op_plugin.cpp), which maps MindSpore's own BatchNormGradExt onto it.
#ifndef MS_BN_GRAD_ENTRY_RUNS_H_
#define MS_BN_GRAD_ENTRY_RUNS_H_

#include "aot_args.h"
#include "bn_spec.gen.h"

namespace bn_grad {

// Checks every shape, dtype and pointer of `call` (the slots of
// spec::batch_norm_backward) before touching memory, then computes the
// outputs; a spec::Error code, never an exception.
int RunBatchNormBackward(const aot::Call &call, const spec::batch_norm_backward::Attrs &attrs);

// The same for BatchNormDoubleBackward (the slots of spec::batch_norm_double_backward).
int RunBatchNormDoubleBackward(const aot::Call &call, const spec::batch_norm_double_backward::Attrs &attrs);

}  // namespace bn_grad

#endif  // MS_BN_GRAD_ENTRY_RUNS_H_
