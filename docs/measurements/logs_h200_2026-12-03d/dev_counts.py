# Per profile, over every measured file of rounds H15-H20 (development data): how many meet each
# target (gather / backup: median <= 3% and p95 <= 10%; compute the same; whole replay <= 2%), and
# the median of the per-file median APE per kind. From the checkout's root: python3 THIS PROFILE...
import json, subprocess, sys, statistics as st
rounds = [("h15", "logs_h200_2026-12-03/h15", "54753 59097 6625"),
          ("h16", "logs_h200_2026-12-03/h16", "68144 78331 81497"),
          ("h17", "logs_h200_2026-12-03b/h17", "103480 20831 28295"),
          ("h18", "logs_h200_2026-12-03c/h18", "31963 40567 42659"),
          ("h19", "logs_h200_2026-12-03c/h19", "44262 44974 58081"),
          ("h20", "logs_h200_2026-12-03d/h20", "60493 66710 70713")]
for prof in sys.argv[1:]:
    for fw in ("model", "synth"):
        n = 0
        ok = {"gather": 0, "backup": 0, "compute": 0, "whole": 0}
        med = {"gather": [], "backup": [], "compute": []}
        for rnd, d, plans in rounds:
            for c in plans.split():
                m = f"docs/measurements/{d}/measured_{rnd}_{c}_tail_{fw}.json"
                try:
                    open(m).close()
                except FileNotFoundError:
                    continue
                p = f"docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl"
                sc = ["--compute-scale", "0.01"] if fw == "synth" else []
                subprocess.run(["./build/kvlanes", "check", "--plan", p, "--measured", m, *sc,
                                "--profile", prof, "--json", "/tmp/dev_counts.json"], capture_output=True)
                j = json.load(open("/tmp/dev_counts.json"))
                k = {x["kind"]: x for x in j["kinds"]}
                n += 1
                for kind in med:
                    med[kind].append(100 * k[kind]["median_ape"])
                    ok[kind] += k[kind]["median_ape"] <= 0.03 and k[kind]["p95_ape"] <= 0.10
                ok["whole"] += abs(j["total"]["error"]) <= 0.02
        print(f"{prof} {fw}: {n} files; at target " + ", ".join(f"{k} {v}" for k, v in ok.items()) +
              "; median of medians " + ", ".join(f"{k} {st.median(v):.2f}%" for k, v in med.items()))
