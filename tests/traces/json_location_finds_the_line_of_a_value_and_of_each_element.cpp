#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "io/input_error.h"
#include "io/json_location.h"

namespace kvlanes {
namespace {

// Lines:   1  2                    3                      4     5       6   7
const char* const kText =
    "{\n \"name\": \"a,\\\"}b\",\n \"requests\": [ {\"t\": 0},\n  7,\n  {\"t\": 1,\n\n   "
    "\"requests\": [[1,\n 2], {}]}\n ]}";

TEST_CASE("the line of a value, and of the deepest step that exists") {
  CHECK(JsonLineOf(kText, {}) == 1);
  CHECK(JsonLineOf(kText, {std::string("name")}) == 2);
  CHECK(JsonLineOf(kText, {std::string("requests"), size_t{1}}) == 4);
  CHECK(JsonLineOf(kText, {std::string("requests"), size_t{2}, std::string("requests")}) == 7);
  // Missing steps: the line of the deepest value found.
  CHECK(JsonLineOf(kText, {std::string("requests"), size_t{2}, std::string("x")}) == 5);
  CHECK(JsonLineOf(kText, {std::string("nothing")}) == 1);
}

TEST_CASE("the lines of every element of an array, in one scan") {
  CHECK(JsonElementLines(kText, {std::string("requests")}) == std::vector<int64_t>{3, 4, 5});
  CHECK(JsonElementLines(kText, {std::string("requests"), size_t{2}, std::string("requests")}) ==
        std::vector<int64_t>{7, 8});
  CHECK(JsonElementLines("[]", {}).empty());
  CHECK(JsonElementLines(kText, {std::string("name")}).empty());     // not an array
  CHECK(JsonElementLines(kText, {std::string("missing")}).empty());  // no such key
}

TEST_CASE("a JSON input with a number beyond a double is an input error at its line") {
  try {
    JsonInput("m.json", "{\"name\": \"1e400 in a string\",\n \"bytes\": [1,\n 2e400]}");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == "m.json");
    CHECK(e.line() == 3);
    CHECK(std::string(e.what()).find("number out of range") != std::string::npos);
    CHECK(std::string(e.what()).find("'2e400'") != std::string::npos);
  }
}

}  // namespace
}  // namespace kvlanes
