#include <doctest/doctest.h>

#include <string>

#include "io/name_table.h"

namespace kvlanes {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr NameTable<Color, 3> kColors{
    {{{Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}}}, "color"};

std::string ParseError(std::string_view name) {
  try {
    kColors.Parse(name, "paint.color", "cfg.yaml", 7);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("a name table parses, names and lists every value") {
  CHECK(kColors.Parse("green", "x") == Color::kGreen);
  CHECK(kColors.Name(Color::kBlue) == "blue");
  CHECK(std::string(kColors.CName(Color::kRed)) == "red");
  CHECK(kColors.List() == "red, green, blue");
  CHECK(kColors.Names().size() == 3);
  CHECK_FALSE(kColors.Find("purple").has_value());
}

TEST_CASE("an unknown name is an error with its location, the valid names and a suggestion") {
  CHECK(ParseError("gren") ==
        "cfg.yaml:7: paint.color: unknown color 'gren' (valid: red, green, blue); did you mean "
        "'green'?");
  // Nothing close: no suggestion.
  CHECK(ParseError("ultraviolet") ==
        "cfg.yaml:7: paint.color: unknown color 'ultraviolet' (valid: red, green, blue)");
}

TEST_CASE("edit distance counts insertions, deletions and substitutions") {
  CHECK(NameDistance("", "abc") == 3);
  CHECK(NameDistance("kitten", "sitting") == 3);
  CHECK(NameDistance("lru", "lru") == 0);
  CHECK(ClosestName("lfru", std::vector<std::string_view>{"lru", "lfu", "fifo"}) == "lru");
}

}  // namespace
}  // namespace kvlanes
