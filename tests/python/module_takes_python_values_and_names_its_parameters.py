"""The kvlanes Python module takes the values a Python user writes and answers in Python terms:
pathlib paths for trace, config and profile; vary values handed back as given (ints stay ints);
a scalar where a list of vary values belongs is an error naming the key; errors name the
parameters (set, vary, allow_unsorted), never the command line's flags (--set, --format).

usage: module_takes_python_values_and_names_its_parameters.py SOURCE_DIR
(PYTHONPATH must hold the built module, as ctest sets it.)
"""
import os
import pathlib
import sys

import kvlanes
from checks import check, error_of, finish

src = pathlib.Path(sys.argv[1])
os.chdir(src)
trace = src / "traces" / "mooncake_excerpt.jsonl"
small = {"serving.mode": "sequential", "cache.cp_size": 1, "cache.host_pages_per_lane": 0}
def paths_may_be_pathlib_paths():
    r = kvlanes.replay(trace, set=small, policy="lru")
    s = kvlanes.replay(str(trace), set=small, policy="lru")
    check(r["report"] == s["report"], "replay(pathlib.Path) equals replay(str)")
    r = kvlanes.replay([trace], config=src / "config" / "default.yaml", policy="lru",
                       profile=src / "config/profiles/8xh200_nccl_model.yaml", set=small)
    check(r["report"]["token_hit_ratio"] > 0, "a list of Paths, config and profile as Paths")
    e = error_of(lambda: kvlanes.replay(42))
    check(isinstance(e, TypeError) and "trace" in str(e), f"replay(42): a TypeError naming trace ({e})")


def vary_values_come_back_as_given():
    out = kvlanes.sweep(trace, policies=["lru"], set=small,
                        vary={"cache.device_pages_per_lane": [1000, 2000]})
    values = [r["vary"]["cache.device_pages_per_lane"] for r in out["runs"]]
    check(values == [1000, 2000] and all(type(v) is int for v in values),
          f"sweep: int vary values come back as ints ({values!r})")
    grid = out["grid"]["vary"][0]["values"]
    check(grid == [1000, 2000], f"sweep: the grid's values as given ({grid!r})")
    out = kvlanes.sweep(trace, policies=["lru"], set=small,
                        vary={"cache.eviction": ["lru", "lfu"], "serving.decode_tokens_per_s": [0.5]})
    check([r["vary"]["cache.eviction"] for r in out["runs"]] == ["lru", "lfu"]
          and out["runs"][0]["vary"]["serving.decode_tokens_per_s"] == 0.5,
          "sweep: str and float vary values come back as given")


def a_scalar_vary_value_names_its_key():
    e = error_of(lambda: kvlanes.sweep(trace, policies=["lru"], vary={"cache.device_pages_per_lane": 5000}))
    check(isinstance(e, TypeError) and "vary['cache.device_pages_per_lane']" in str(e)
          and "[5000]" in str(e), f"vary={{key: 5000}}: a TypeError naming the key ({e})")
    e = error_of(lambda: kvlanes.sweep(trace, policies=["lru"], vary={"cache.eviction": "lru"}))
    check(isinstance(e, TypeError) and "vary['cache.eviction']" in str(e),
          f"vary={{key: 'lru'}}: a TypeError naming the key ({e})")


def errors_name_python_parameters_not_flags():
    e = error_of(lambda: kvlanes.replay(trace, set={"cache.cp_size": "four"}))
    check(isinstance(e, ValueError) and "set['cache.cp_size']" in str(e) and "--" not in str(e),
          f"a bad set value names set['cache.cp_size'] ({e})")
    e = error_of(lambda: kvlanes.replay(trace, config={"cache": {"eviction": "lrux"}}))
    check(isinstance(e, ValueError) and "config['cache.eviction']" in str(e) and "--" not in str(e),
          f"a bad config value names config['cache.eviction'] ({e})")
    e = error_of(lambda: kvlanes.sweep(trace, policies=["lru"], vary={"cache.cp_size": [0]}))
    check(isinstance(e, ValueError) and "vary['cache.cp_size'] = 0" in str(e) and "--" not in str(e),
          f"a bad vary value names vary['cache.cp_size'] ({e})")
    e = error_of(lambda: kvlanes.replay(src / "README.md"))
    check(isinstance(e, ValueError) and "trace.format" in str(e) and "--format" not in str(e),
          f"an undetectable trace names trace.format, not --format ({e})")


for test in (paths_may_be_pathlib_paths, vary_values_come_back_as_given,
             a_scalar_vary_value_names_its_key, errors_name_python_parameters_not_flags):
    print(f"--- {test.__name__}")
    test()
finish()
