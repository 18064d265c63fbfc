// Empty on purpose: stands in for the MindSpore-internal header of this name that
// custom_aot_extra.h includes; ms_aot_compat.h declares what that header needs.
