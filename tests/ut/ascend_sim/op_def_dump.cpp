// Prints what a generated op definition (GEN_HEADER, namespace NS) declares,
// through the recording stand-in of op_def_stub/, as JSON: signature,
// attributes, every AddConfig, and the output dtypes SetOutputDataTypes picks
// with every input given (input i has dtype code 100 + i) and with every
// optional input absent.
#include <cstdio>
#include <string>
#include <vector>
#include GEN_HEADER

namespace {
std::string Params(const std::vector<ops::OpParamDef> &ps, bool lists)
{
    std::string s = "[";
    for (const ops::OpParamDef &p : ps) {
        s += (s.size() > 1 ? "," : "") + std::string("{\"name\":\"") + p.name + "\",\"param\":" +
             std::to_string(p.param);
        if (lists) {
            s += ",\"dtypes\":[";
            for (size_t i = 0; i < p.dtypes.size(); ++i) s += (i ? "," : "") + std::to_string(int(p.dtypes[i]));
            s += "],\"formats\":[";
            for (size_t i = 0; i < p.formats.size(); ++i) s += (i ? "," : "") + std::to_string(int(p.formats[i]));
            s += "]";
        }
        s += "}";
    }
    return s + "]";
}

std::string Dtypes(bool optionalGiven, const ops::OpDef &def)
{
    gert::InferDataTypeContext ctx;
    for (size_t i = 0; i < def.inputs.size(); ++i) {
        const bool absent = !optionalGiven && def.inputs[i].param == ops::OPTIONAL;
        ctx.inputs.push_back(absent ? ge::DT_UNDEFINED : ge::DataType(100 + int(i)));
    }
    NS::SetOutputDataTypes(&ctx);
    std::string s = "[";
    for (size_t o = 0; o < def.outputs.size(); ++o) s += (o ? "," : "") + std::to_string(int(ctx.outputs.at(int(o))));
    return s + "]";
}
}  // namespace

int main()
{
    ops::OpDef def;
    NS::DeclareSignature(def);
    NS::AddSocConfigs(def);
    std::printf("{\"op_type\":\"%s\",\"inputs\":%s,\"outputs\":%s,\"attrs\":[", NS::OP_TYPE,
                Params(def.inputs, false).c_str(), Params(def.outputs, false).c_str());
    for (size_t i = 0; i < def.attrs.size(); ++i) {
        std::printf("%s{\"name\":\"%s\",\"option\":%d,\"value\":\"%s\"}", i ? "," : "", def.attrs[i].name.c_str(),
                    def.attrs[i].option, def.attrs[i].value.c_str());
    }
    std::printf("],\"configs\":[");
    for (size_t i = 0; i < def.core.configs.size(); ++i) {
        const auto &c = def.core.configs[i];
        std::printf("%s{\"soc\":\"%s\",\"flags\":%d,\"inputs\":%s,\"outputs\":%s}", i ? "," : "", c.first.c_str(),
                    c.second.flags, Params(c.second.inputs, true).c_str(), Params(c.second.outputs, true).c_str());
    }
    std::printf("],\"dtypes_all_given\":%s,\"dtypes_optional_absent\":%s}\n", Dtypes(true, def).c_str(),
                Dtypes(false, def).c_str());
    return 0;
}
