// libFuzzer target of the plan reader: the input is a plan file's text. It goes through
// ReadPlanFile (version, ValidatePlanHeader, every request line, the trailer's counts), then, when
// read, through what the executor derives from it before touching memory (MakeExecPlan: geometry,
// per-request size checks, the forward spin, priced from the stored profile for older plans;
// UseModelForward). An InputError is the expected
// answer to bad input; anything else escapes to libFuzzer. The reader reads from a path, so each
// input is written to one file per process first. Built only with -DKVLANES_FUZZ=ON and clang
// (tools/fuzz.sh).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

#include "exec/executor.h"
#include "io/input_error.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kPath = "/tmp/kvlanes-fuzz-plan-" + std::to_string(getpid()) + ".jsonl";
  {
    std::ofstream out(kPath, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  kvlanes::PlanFile plan;
  try {
    plan = kvlanes::ReadPlanFile(kPath);
  } catch (const kvlanes::InputError&) {
    return 0;
  }
  try {
    // A plan of version 2 or 3 carries no forward spin: priced as `kvlanes exec` prices it.
    if (!plan.header.forward_spin)
      kvlanes::PricePlanSpin(plan, kvlanes::ResolvePlanProfile(plan.header, "", kPath));
    kvlanes::exec::ExecPlan e = kvlanes::exec::MakeExecPlan(std::move(plan), kPath, -1);
    kvlanes::exec::UseModelForward(e);
  } catch (const kvlanes::InputError&) {
  }
  return 0;
}
