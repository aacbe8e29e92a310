#!/usr/bin/env python3
"""Whole process, interleaved, timed by the kernel's accounting of each child (user + system CPU
ms, minor faults; getrusage, for machines without perf): per round the Python reference model,
then `BIN replay ... -q --json F` under each KVLANES_HEAP setting given.
Usage: rusage_rounds.py ROUNDS BIN SETTING..."""
import os, resource, subprocess, sys

rounds, binary, settings = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
T = 'traces/mooncake/synthetic_trace.jsonl'
C1 = ['--set', 'cache.cp_size=1', '--set', 'cache.host_pages_per_lane=0',
      '--set', 'cache.device_pages_per_lane=160000']

def run(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ms = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3
    return ms, after.ru_minflt - before.ru_minflt

for r in range(1, rounds + 1):
    load = open('/proc/loadavg').read().split()[0]
    ref = run(['python3', 'tests/sim/reference/refsim.py', '--page-tokens', '64',
               '--capacity-pages', '160000', T], dict(os.environ))
    line = f'round {r} load {load} refsim {ref[0]:.2f}/{ref[1]}'
    for s in settings:
        env = dict(os.environ, KVLANES_HEAP=s)
        ms, flt = run([binary, 'replay', '--trace', T] + C1 + ['--policy', 'lru', '-q', '--json', f'/tmp/rr_{s}.json'], env)
        line += f' {s} {ms:.2f}/{flt}'
    print(line, flush=True)
