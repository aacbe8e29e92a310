#include "sim/yaml_input.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <set>
#include <sstream>
#include <utility>
#include <variant>
#include <vector>

#include "io/input_error.h"
#include "io/input_file.h"

namespace kvlanes {

namespace {

// One walk over a parsed document. The key path is kept as segments and joined only for an
// error, so an aliased subtree visited many times costs no string building.
class YamlWalk {
 public:
  YamlWalk(std::string file, std::string field) : file_(std::move(file)), root_(std::move(field)) {}

  void Visit(const YAML::Node& node) {
    if (++visited_ > kMaxYamlNodes)
      Fail(node, "the document expands to more than " + std::to_string(kMaxYamlNodes) +
                     " nodes (aliases?)");
    if (!node.IsMap() && !node.IsSequence()) return;
    for (const YAML::Node& a : ancestors_)
      if (a.is(node)) Fail(node, "an alias refers to a node that contains it (an alias cycle)");
    if (static_cast<int>(ancestors_.size()) >= kMaxYamlDepth)
      Fail(node, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
    ancestors_.push_back(node);
    if (node.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : node) {
        segments_.emplace_back(kv.first.IsScalar() ? kv.first.Scalar() : "(non-scalar key)");
        if (!seen.insert(std::get<std::string>(segments_.back())).second)
          Fail(kv.first, "key '" + std::get<std::string>(segments_.back()) + "' given twice");
        Visit(kv.second);
        segments_.pop_back();
      }
    } else {
      for (size_t i = 0; i < node.size(); ++i) {
        segments_.emplace_back(i);
        Visit(node[i]);
        segments_.pop_back();
      }
    }
    ancestors_.pop_back();
  }

 private:
  [[noreturn]] void Fail(const YAML::Node& at, const std::string& msg) const {
    std::string path = root_;
    for (const auto& s : segments_) {
      if (const auto* key = std::get_if<std::string>(&s))
        path += (path.empty() ? "" : ".") + *key;
      else
        path += "[" + std::to_string(std::get<size_t>(s)) + "]";
    }
    throw InputError(file_, YamlLine(at), path, msg);
  }

  std::string file_;
  std::string root_;
  std::vector<YAML::Node> ancestors_;
  std::vector<std::variant<std::string, size_t>> segments_;
  int64_t visited_ = 0;
};

// Counts a stream's documents from the parser's events and refuses one that would not end.
// yaml-cpp 0.7 (Debian 12) loops for ever in LoadAll on a token that starts no node (a stray `,`
// at the top level): each round yields an empty document at the same place and allocates until
// memory runs out (fixed upstream in yaml-cpp 0.8, jbeder/yaml-cpp#1319). A document that starts
// where the previous one started consumed nothing, so the parser is stuck there.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_ > 0 && mark.pos == last_start_.pos) {
      stuck_ = true;
      stuck_at_ = mark;
    }
    last_start_ = mark;
    ++documents_;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  bool stuck() const { return stuck_; }
  const YAML::Mark& stuck_at() const { return stuck_at_; }

 private:
  int64_t documents_ = 0;
  YAML::Mark last_start_;
  YAML::Mark stuck_at_;
  bool stuck_ = false;
};

// Parses `text` for events only, stopping at the first document that consumes nothing; throws
// what the parser throws.
void RefuseStuckStream(const std::string& text, const std::string& file, const std::string& field,
                       const std::string& syntax_prefix) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  while (parser.HandleNextDocument(counter))
    if (counter.stuck())
      throw InputError(file, counter.stuck_at().line + 1, field,
                       syntax_prefix + "a token that starts no value (a stray `,`?)");
}

// YAML::LoadAll, with yaml-cpp's exceptions turned into InputErrors located in `file` (or at
// `field` for a command-line value). One document only: yaml-cpp's Load would silently drop
// everything after a `---`, a syntax error included.
YAML::Node ParseOne(const std::string& text, const std::string& file, const std::string& field,
                    const std::string& syntax_prefix) {
  std::vector<YAML::Node> docs;
  try {
    RefuseStuckStream(text, file, field, syntax_prefix);
    docs = YAML::LoadAll(text);
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(file, e.mark.line + 1, field,
                     "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  } catch (const YAML::ParserException& e) {
    throw InputError(file, e.mark.line + 1, field, syntax_prefix + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(file, e.mark.line >= 0 ? e.mark.line + 1 : 0, field, "YAML error: " + e.msg);
  }
  if (docs.size() > 1)
    throw InputError(file, YamlLine(docs[1]), field,
                     "a second YAML document (after `---`): an input holds one document");
  return docs.empty() ? YAML::Node() : docs[0];
}

}  // namespace

const char* YamlKind(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (n.IsScalar()) return "a scalar";
  return "null";
}

void CheckYamlKeys(const YAML::Node& root, const std::string& file, const std::string& field) {
  YamlWalk(file, field).Visit(root);
}

YAML::Node ParseYamlDocument(const std::string& text, const std::string& file) {
  YAML::Node root = ParseOne(text, file, "", "YAML syntax error: ");
  CheckYamlKeys(root, file, "");
  return root;
}

YAML::Node LoadYamlFile(const std::string& path, const std::string& what) {
  return ParseYamlDocument(ReadInputFile(path, what), path);
}

YAML::Node LoadYamlText(const std::string& text, const std::string& field) {
  try {
    CheckUtf8(text, "", "value");
  } catch (const InputError& e) {
    throw InputError("", 0, field, e.message());
  }
  YAML::Node node = ParseOne(text, "", field, "cannot parse value '" + text + "': ");
  CheckYamlKeys(node, "", field);
  return node;
}

}  // namespace kvlanes
