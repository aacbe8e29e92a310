"""The kvlanes Python module reads a config dict (config= or set=) as strictly as a config file:
a dict nested past the YAML walk's depth bound (256) is refused with an InputError naming the
key path, not a crash; a key given both dotted and nested in one dict is refused naming both
spellings, not the last one winning; the same key in config= and then set= is an override; a
sweep grid past the CLI's bound is refused before any run.

usage: module_refuses_deep_and_doubled_config_dicts.py SOURCE_DIR
(PYTHONPATH must hold the built module, as ctest sets it.)
"""
import pathlib
import sys

import kvlanes
from checks import check, error_of, finish

src = pathlib.Path(sys.argv[1])
trace = src / "traces" / "mooncake_excerpt.jsonl"
small = {"serving.mode": "sequential", "cache.host_pages_per_lane": 0}
def nested(depth, leaf):
    d = leaf
    for _ in range(depth - 1):
        d = {"x": d}
    return d


def a_dict_nested_100000_deep_is_an_input_error():
    for param in ("set", "config"):
        e = error_of(lambda: kvlanes.replay(trace, **{param: nested(100000, {"x": 1})}))
        check(isinstance(e, kvlanes.InputError) and isinstance(e, ValueError)
              and "nested deeper than 256 levels" in str(e)
              and f"{param}['x.x.x." in str(e),
              f"{param}= nested 100000 deep: InputError naming the key path ({str(e)[:80]}...)")


def a_dict_nested_256_deep_is_read_to_its_leaf():
    # 256 dicts are within the bound: the leaf's key is read (and is unknown).
    e = error_of(lambda: kvlanes.replay(trace, set=nested(256, {"x": 1})))
    check(isinstance(e, kvlanes.InputError) and "unknown key" in str(e)
          and "nested deeper" not in str(e),
          f"set= nested 256 deep: the leaf key is read ({str(e)[:60]}...)")


def a_key_dotted_and_nested_in_one_dict_is_refused():
    e = error_of(lambda: kvlanes.replay(trace, set={"cache.cp_size": 0, "cache": {"cp_size": 4}}))
    check(isinstance(e, kvlanes.InputError)
          and "set['cache']['cp_size']: given twice (also as set['cache.cp_size'])" in str(e),
          f"dotted then nested: refused naming both ({e})")
    e = error_of(lambda: kvlanes.replay(trace, config={"cache": {"cp_size": 4}, "cache.cp_size": 0}))
    check(isinstance(e, kvlanes.InputError)
          and "config['cache.cp_size']: given twice (also as config['cache']['cp_size'])" in str(e),
          f"nested then dotted: refused naming both ({e})")


def a_key_in_config_then_set_is_an_override():
    r = kvlanes.replay(trace, policy="lru", config={"cache.cp_size": 4},
                       set=dict(small, cache={"cp_size": 2}))
    got = r["report"]["config"]["cache.cp_size"]
    check(got == 2, f"config= then set=: set wins, as --set over --config (cp_size {got})")


def a_sweep_grid_too_large_is_refused_before_any_run():
    # A vary list of 10^12 values (read without end before the bound) and a product of lists
    # past the bound: both InputErrors naming vary, as `kvlanes sweep --vary` refuses them.
    e = error_of(lambda: kvlanes.sweep(trace, policies=["lru"],
                                       vary={"cache.device_pages_per_lane": range(10**12)}))
    check(isinstance(e, kvlanes.InputError) and "vary['cache.device_pages_per_lane']" in str(e)
          and "kMaxSweepRuns" in str(e), f"a 10^12-value vary list: refused ({e})")
    e = error_of(lambda: kvlanes.sweep(trace, policies=["lru"],
                                       vary={"cache.device_pages_per_lane": range(1, 2049),
                                             "trace.rate_scale": range(1, 1025)}))
    check(isinstance(e, kvlanes.InputError) and "vary" in str(e) and "2048 (" in str(e),
          f"a 2^21-run product: refused naming its factors ({e})")


def values_and_paths_python_cannot_write_are_named():
    # A dict that contains itself: the depth bound, not a crash. A value JSON cannot hold: an
    # InputError naming the key. A path with a byte that is not UTF-8 (a surrogate escape): read
    # as its bytes, so the error is the file system's, naming the file.
    loop = {}
    loop["x"] = loop
    e = error_of(lambda: kvlanes.replay(trace, config=loop))
    check(isinstance(e, kvlanes.InputError) and "nested deeper than 256" in str(e),
          f"config= holding itself: refused by the depth bound ({str(e)[:80]}...)")
    for value in (object(), b"4", [1, []]):
        if isinstance(value, list):
            value[1].append(value)  # a list that contains itself
        e = error_of(lambda: kvlanes.replay(trace, set={"cache.cp_size": value}))
        check(isinstance(e, kvlanes.InputError) and "set['cache.cp_size']" in str(e),
              f"set= value of type {type(value).__name__}: refused naming the key ({e})")
    e = error_of(lambda: kvlanes.replay(str(src / "traces") + "/tr\udcff.jsonl"))
    check(isinstance(e, kvlanes.InputError) and "tr" in str(e) and ".jsonl" in str(e),
          f"a non-UTF-8 trace path: read as its bytes, not found ({e})")


for test in (a_dict_nested_100000_deep_is_an_input_error, a_dict_nested_256_deep_is_read_to_its_leaf,
             a_key_dotted_and_nested_in_one_dict_is_refused, a_key_in_config_then_set_is_an_override,
             a_sweep_grid_too_large_is_refused_before_any_run,
             values_and_paths_python_cannot_write_are_named):
    print(f"--- {test.__name__}")
    test()
finish()
