// The executor linked with kvlanes_exec alone (the plan contract, kvlanes_plan; no kvlanes_sim:
// no cost model, no hardware profile reader, no engine): reads a plan, runs its first requests on
// the host backend and prints what it ran and where its forward spin came from. Usage:
// kvlanes_exec_alone PLAN OUT N. Exit: the run's (0 ok, 1 failed, 2 bad input).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "exec/exec_run.h"
#include "exec/executor.h"
#include "io/input_error.h"
#include "sim/predict/plan.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PLAN OUT N\n", argv[0]);
    return 2;
  }
  using namespace kvlanes;
  try {
    exec::ExecPlan plan = exec::MakeExecPlan(ReadPlanFile(argv[1]), argv[1], std::atoll(argv[3]));
    exec::RunOptions o;
    o.backend = "host";
    o.out = argv[2];
    o.timeout_s = 60;
    o.quiet = true;
    const exec::RunOutcome out = exec::RunLocal(plan, o);
    if (out.exit_code != 0) {
      std::fprintf(stderr, "%s\n", out.message.c_str());
      return out.exit_code;
    }
    std::printf("executed %zu requests on %d ranks, spin from profile %s\n", plan.requests.size(),
                plan.geo.ranks, plan.compute_model["profile"].get<std::string>().c_str());
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
