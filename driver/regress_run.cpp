#include "driver/regress_run.h"

#include <optional>

#include "driver/run_grid.h"
#include "io/input_error.h"
#include "policies/registry.h"
#include "traces/trace_reader.h"

namespace kvlanes::driver {

regress::PolicyCatalog RegistryCatalog() {
  regress::PolicyCatalog c;
  c.all = [] {
    std::vector<std::string> names;
    for (const PolicyInfo& p : RegisteredPolicies()) names.push_back(p.name);
    return names;
  };
  c.check = [](const std::string& name) { CheckPolicyName(name, "policy"); };
  return c;
}

std::vector<nlohmann::ordered_json> RunSuite(const regress::Suite& suite, int threads,
                                             bool check_invariants,
                                             const std::function<void(size_t)>& on_done,
                                             std::vector<size_t>* trace_requests) {
  std::vector<Trace> traces;
  traces.reserve(suite.cases.size());
  for (const regress::SuiteCase& c : suite.cases) {
    TraceOptions opt;
    opt.page_tokens = c.config.cache.page_tokens;
    opt.block_tokens = c.config.trace.block_tokens;
    std::optional<TraceFormat> fmt;
    if (c.config.trace.format != "auto") fmt = ParseTraceFormat(c.config.trace.format);
    traces.push_back(LoadTrace(c.traces, fmt, opt));
    if (traces.back().requests.empty())
      throw InputError(c.traces[0], 0, "", "the trace holds no requests (case " + c.name + ")");
  }
  if (trace_requests) {
    trace_requests->clear();
    for (const Trace& t : traces) trace_requests->push_back(t.requests.size());
  }
  const std::vector<regress::SuiteRun> runs = regress::SuiteRuns(suite);
  std::vector<ReplayJob> jobs;
  for (const regress::SuiteRun& r : runs) {
    ReplayJob job{r.policy, suite.cases[r.case_index].config, &traces[r.case_index], {}};
    job.config.policy = r.policy;
    job.engine.check_invariants = check_invariants;
    jobs.push_back(std::move(job));
  }
  return RunReplayJobs(jobs, threads, [&](size_t i, const nlohmann::ordered_json&) {
    if (on_done) on_done(i);
  });
}

}  // namespace kvlanes::driver
