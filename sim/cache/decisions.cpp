// The gather method names (sim/cache/decisions.h): the shipped components' names, read from their
// classes without building them (methods/shipped.h), then the names registered at run time. The
// plan reader parses through this table, so the plan contract knows every registered method
// without linking the components.
#include "sim/cache/decisions.h"

#include <cstdlib>

#include "methods/shipped.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

template <class... M>
std::vector<std::string_view> NamesOf(ComponentList<M...>) {
  return {std::string_view(M::kName)...};
}

std::vector<std::string_view>& NameList() {
  static std::vector<std::string_view> names = NamesOf(ShippedGatherMethods{});
  return names;
}

}  // namespace

std::string_view GatherMethodNameTable::Name(GatherMethod m) const {
  const size_t i = static_cast<size_t>(m);
  if (i >= NameList().size()) std::abort();
  return NameList()[i];
}

std::optional<GatherMethod> GatherMethodNameTable::Find(std::string_view name) const {
  const std::vector<std::string_view>& names = NameList();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<GatherMethod>(i);
  return std::nullopt;
}

GatherMethod GatherMethodNameTable::Parse(std::string_view name, const std::string& where,
                                          const std::string& file, int64_t line) const {
  if (auto m = Find(name)) return *m;
  ThrowUnknownName(what, name, Names(), where, file, line);
}

std::vector<std::string_view> GatherMethodNameTable::Names() const { return NameList(); }

GatherMethod AddGatherMethodName(const char* name) {
  KV_CHECK(name != nullptr && !kGatherMethodNames.Find(name),
           "gather method " << (name ? name : "(null)") << " registered twice");
  NameList().push_back(name);
  return static_cast<GatherMethod>(NameList().size() - 1);
}

}  // namespace kvlanes
