# exec_alone_runs_a_plan_with_no_profile_anywhere: replays a plan with a copy of a profile, removes
# the copy, then runs the plan with kvlanes_exec_alone from the (empty) working directory.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY_FILE ${SRC}/config/profiles/2xh200_measured_runs4.yaml ${WORK}/profile.yaml)
execute_process(
  COMMAND ${KVLANES} replay --trace ${SRC}/traces/kvtester_trace_0034.json -q
          --set cache.cp_size=2 --set model.layers=2 --set cache.device_pages_per_lane=3000
          --set cache.host_pages_per_lane=3000 "--set" "model.pools=[{name: kv, bytes_per_token_layer: 8}]"
          --set hardware.profile=${WORK}/profile.yaml --plan ${WORK}/plan.jsonl
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "replay failed: ${rc}")
endif()
file(REMOVE ${WORK}/profile.yaml)
file(GLOB here *)
if(here)
  message(FATAL_ERROR "the working directory is not empty: ${here}")
endif()
execute_process(COMMAND ${ALONE} ${WORK}/plan.jsonl ${WORK}/measured.json 5 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvlanes_exec_alone failed (${rc}): ${err}")
endif()
message("${out}")
