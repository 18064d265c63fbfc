// A recording stand-in for CANN's register/op_def_registry.h: just the calls
// the generated op definitions (ascend_impl/op_host/*_def.gen.h) make, with
// the same names and argument types, so that test_op_def_headers.py can
// compile each generated header without CANN and check what it declares.
#ifndef OP_DEF_STUB_REGISTRY_H
#define OP_DEF_STUB_REGISTRY_H
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ge {
enum DataType : int { DT_UNDEFINED = -1, DT_FLOAT = 0, DT_FLOAT16 = 1, DT_BF16 = 27, DT_INT32 = 3, DT_INT64 = 9 };
enum Format { FORMAT_NCHW = 0, FORMAT_NHWC = 1, FORMAT_ND = 2, FORMAT_NC = 3, FORMAT_NCDHW = 30,
              FORMAT_NDHWC = 31, FORMAT_NCL = 47 };
}  // namespace ge

namespace gert {
// Dtypes of the inputs of one call (DT_UNDEFINED: an absent optional input) and the outputs set.
struct InferDataTypeContext {
    std::vector<ge::DataType> inputs;
    std::map<int, ge::DataType> outputs;
    ge::DataType GetInputDataType(int i) const { return inputs.at(i); }
    ge::DataType GetOptionalInputDataType(int i) const { return inputs.at(i); }
    void SetOutputDataType(int i, ge::DataType d) { outputs[i] = d; }
};
}  // namespace gert

namespace ops {
enum Option { IGNORE = 0, OPTIONAL = 1, REQUIRED = 2, DYNAMIC = 3, VIRTUAL = 4 };  // as metadef's op_def.h

struct OpParamDef {
    std::string name;
    int param = -1;
    std::vector<ge::DataType> dtypes;
    std::vector<ge::Format> formats;
    OpParamDef &ParamType(Option p) { param = p; return *this; }
    OpParamDef &DataType(const std::vector<ge::DataType> &d) { dtypes = d; return *this; }
    OpParamDef &Format(const std::vector<ge::Format> &f) { formats = f; return *this; }
};

struct OpAttrDef {
    std::string name, value;
    int option = -1;
    OpAttrDef &AttrType(Option o) { option = o; return *this; }
    OpAttrDef &Bool(bool v) { value = v ? "bool:true" : "bool:false"; return *this; }
    OpAttrDef &Float(float v) { value = "float:" + std::to_string(v); return *this; }
    OpAttrDef &String(const char *v) { value = std::string("str:") + v; return *this; }
    OpAttrDef &ListInt(const std::vector<int64_t> &v)
    {
        value = "list_int:";
        for (int64_t x : v) value += std::to_string(x) + ",";
        return *this;
    }
};

// Params keep their declaration order (a vector, found by name).
inline OpParamDef &Find(std::vector<OpParamDef> &params, const char *name)
{
    for (OpParamDef &p : params) if (p.name == name) return p;
    OpParamDef p;
    p.name = name;
    params.push_back(p);
    return params.back();
}

struct OpAICoreConfig {
    std::vector<OpParamDef> inputs, outputs;
    int flags = 0;
    OpAICoreConfig &DynamicCompileStaticFlag(bool f) { flags += f; return *this; }
    OpAICoreConfig &DynamicRankSupportFlag(bool f) { flags += f; return *this; }
    OpAICoreConfig &DynamicShapeSupportFlag(bool f) { flags += f; return *this; }
    OpParamDef &Input(const char *name) { return Find(inputs, name); }
    OpParamDef &Output(const char *name) { return Find(outputs, name); }
};

struct OpAICoreDef {
    std::vector<std::pair<std::string, OpAICoreConfig>> configs;
    void AddConfig(const char *soc, const OpAICoreConfig &cfg) { configs.emplace_back(soc, cfg); }
};

struct OpDef {
    std::vector<OpParamDef> inputs, outputs;
    std::vector<OpAttrDef> attrs;
    OpAICoreDef core;
    OpParamDef &Input(const char *name) { return Find(inputs, name); }
    OpParamDef &Output(const char *name) { return Find(outputs, name); }
    OpAttrDef &Attr(const char *name)
    {
        OpAttrDef a;
        a.name = name;
        attrs.push_back(a);
        return attrs.back();
    }
    OpAICoreDef &AICore() { return core; }
};
}  // namespace ops
#endif  // OP_DEF_STUB_REGISTRY_H
