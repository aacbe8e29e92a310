// calibrate's note on measurement files from sweeps that read a fresh allocation's zeros as the
// proxy's prefix (docs/calibration.md, "Data"): such a file is named with its count of proxy
// samples over a prefix; a file whose context says the buffers held the pattern, or with no proxy
// sample over a prefix, gets none.
#include <doctest/doctest.h>

#include <string>

#include "sim/compare/measurements.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes {
namespace {

Measurements ZeroNoteFile(const nlohmann::json& context, const nlohmann::json& samples) {
  const nlohmann::json doc = {
      {"kvlanes_measurements", 1}, {"context", context}, {"samples", samples}};
  return ParseMeasurements(doc.dump(1), "forward.json");
}

}  // namespace

TEST_CASE("calibrate notes proxy samples over a prefix from a sweep that left its buffers zero") {
  const nlohmann::json grid = {test::ProxyForwardSample(181, 0, 1e-3, 8e-3),
                               test::ProxyForwardSample(181, 6144, 2e-3, 9e-3),
                               test::ProxyForwardSample(2113, 24576, 7e-2, 8e-2)};
  const std::string note = ZeroPrefixNote(ZeroNoteFile({{"tool", "kvlanes bench sweep"}}, grid));
  CHECK(note.rfind("forward.json: 2 proxy samples over a prefix", 0) == 0);
  CHECK(note.find("re-run the sweep") != std::string::npos);
  // The sweep that filled its buffers says so: no note.
  CHECK(ZeroPrefixNote(ZeroNoteFile({{"buffers", "pattern"}}, grid)).empty());
  // Proxy samples over no prefix read no buffer: no note either.
  const nlohmann::json no_prefix = {test::ProxyForwardSample(181, 0, 1e-3, 8e-3)};
  CHECK(ZeroPrefixNote(ZeroNoteFile({{"tool", "kvlanes bench sweep"}}, no_prefix)).empty());
}

}  // namespace kvlanes
