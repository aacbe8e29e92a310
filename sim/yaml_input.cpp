#include "sim/yaml_input.h"

#include <set>
#include <utility>
#include <vector>

#include "traces/input_error.h"
#include "traces/input_file.h"

namespace kvlanes {

void CheckYamlKeys(const YAML::Node& root, const std::string& file, const std::string& field) {
  std::vector<std::pair<YAML::Node, std::string>> todo{{root, field}};
  int64_t visited = 0;
  while (!todo.empty()) {
    auto [node, path] = std::move(todo.back());
    todo.pop_back();
    if (++visited > kMaxYamlNodes)
      throw InputError(file, YamlLine(node), path,
                       "the document expands to more than " + std::to_string(kMaxYamlNodes) +
                           " nodes (aliases?)");
    if (node.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : node) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "(non-scalar key)";
        const std::string sub = path.empty() ? key : path + "." + key;
        if (!seen.insert(key).second)
          throw InputError(file, YamlLine(kv.first), sub, "key '" + key + "' given twice");
        todo.emplace_back(kv.second, sub);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i)
        todo.emplace_back(node[i], path + "[" + std::to_string(i) + "]");
    }
  }
}

YAML::Node LoadYamlFile(const std::string& path, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(ReadInputFile(path, what));
  } catch (const YAML::ParserException& e) {
    throw InputError(path, e.mark.line + 1, "", "YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", "YAML error: " + e.msg);
  }
  CheckYamlKeys(root, path, "");
  return root;
}

YAML::Node LoadYamlText(const std::string& text, const std::string& field) {
  try {
    CheckUtf8(text, "", "value");
  } catch (const InputError& e) {
    throw InputError("", 0, field, e.message());
  }
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError("", 0, field, "cannot parse value '" + text + "': " + e.msg);
  }
  CheckYamlKeys(node, "", field);
  return node;
}

}  // namespace kvlanes
