import json, sys, os, re, statistics
d = sys.argv[1]
print("| config | round | binary | load (1 min, before) | floor (s) | replay (s) | driver (s) | plan extra (s) | plan / replay | plan bytes |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = {}
for cfg in ("cp1", "cp4"):
    for r in (1, 2, 3):
        for b in ("base", "new"):
            f = f"{d}/{cfg}.{b}.{r}"
            if not os.path.exists(f + ".json"):
                continue
            j = json.load(open(f + ".json"))
            load = re.search(r"load average: ([0-9.]+)", open(f + ".load").read()).group(1)
            ratio = j["plan_extra_s"] / j["replay_s"]
            ratios.setdefault((cfg, b), []).append(ratio)
            print(f"| {cfg} | {r} | {b} | {load} | {j['floor_s']:.4f} | {j['replay_s']:.4f} | {j['driver_s']:.4f} | "
                  f"{j['plan_extra_s']:.4f} | {ratio:.2f} | {j['plan_bytes']} |")
print()
for (cfg, b), v in sorted(ratios.items()):
    print(f"{cfg} {b}: plan/replay {', '.join(f'{x:.2f}' for x in v)} (median {statistics.median(v):.2f})")
