#!/usr/bin/env python3
"""Serving plans of the shape the GPU targets use (DeepSeek-V3.2 at 4 and at 61 layers, cp_size 1,
one replica, offered loads 0.9 and 0.5) run end to end on the host backend: replay -> exec
--replica 0 (passes with open-loop arrivals) -> check. Sixteen short requests made from the
shipped excerpt keep the pools small (200 device and 200 host pages per lane). No timing is asserted: the
host backend is no GPU; the run, its records and the check's serving verdict are.

usage: serving_plans_of_the_model_run_on_the_host_backend.py KVLANES SOURCE_DIR WORK_DIR
"""
import csv, datetime, json, os, subprocess

from script_checks import check, finish, start

kvlanes, src, work = start()


def run(*args):
    return subprocess.run([kvlanes, *args], capture_output=True, text=True, timeout=300)


# The excerpt's first twelve requests of at most 3,000 input tokens, and the four longest of them
# asked again 500 ms later (their prefixes hit: gathers to verify), in time order.
trace = os.path.join(work, "short.jsonl")
with open(os.path.join(src, "traces/mooncake_excerpt.jsonl")) as f:
    short = [json.loads(line) for line in f if json.loads(line)["input_length"] <= 3000][:12]
again = [dict(r, timestamp=r["timestamp"] + 500) for r in sorted(short, key=lambda r: -r["input_length"])[:4]]
REQUESTS = len(short) + len(again)
with open(trace, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in sorted(short + again, key=lambda r: r["timestamp"])))


def replay(layers, rate_scale, plan=None):
    args = ["replay", "--trace", trace, "--config", os.path.join(src, "config/default.yaml"), "-q",
            "--set", f"model.layers={layers}", "--set", "cache.cp_size=1", "--set", "serving.replicas=1",
            "--set", "cache.device_pages_per_lane=200", "--set", "cache.host_pages_per_lane=200",
            "--set", f"trace.rate_scale={rate_scale}", "--json", os.path.join(work, "report.json")]
    r = run(*args, *(["--plan", plan] if plan else []))
    if r.returncode != 0:
        return None
    with open(os.path.join(work, "report.json")) as f:
        return json.load(f)["serving"]["per_replica"][0]


for layers in (4, 61):
    base = replay(layers, 1)
    check(base is not None and base["offered_load"] > 0, f"{layers} layers: the short trace replays in serving mode")
    if base is None:
        continue
    for load in (0.9, 0.5):
        what = f"{layers} layers, load {load}"
        plan = os.path.join(work, f"plan_{layers}_{load}.jsonl")
        # Batching makes busy time depend on the rate: one correction brings the load within 2%.
        rate = load / base["offered_load"]
        first = replay(layers, rate)
        rep = first and replay(layers, rate * load / first["offered_load"], plan)
        check(rep is not None and abs(rep["offered_load"] - load) < 0.02 * load,
              f"{what}: the plan is made at that load ({rep and rep['offered_load']:.4f})")
        if rep is None:
            continue
        with open(plan) as f:
            trailer = json.loads(f.read().splitlines()[-1])["kvlanes_plan_end"]
        measured = os.path.join(work, f"measured_{layers}_{load}.json")
        r = run("exec", "--plan", plan, "--replica", "0", "--backend", "host", "-q", "--timeout-s", "60",
                "--out", measured)
        check(r.returncode == 0, f"{what}: exec runs the plan's passes on the host backend" +
              ("" if r.returncode == 0 else f" (exit {r.returncode}: {r.stderr.strip()[-300:]})"))
        if r.returncode != 0:
            continue
        with open(measured) as f:
            m = json.load(f)
        passes = [o for o in m["ops"] if o["kind"] == "pass"]
        ttft = [o for o in m["ops"] if o["kind"] == "ttft"]
        check(len(passes) == trailer["passes"] == len(m["serving"]["passes"]),
              f"{what}: every pass is measured ({len(passes)} of {trailer['passes']})")
        check(len(ttft) == trailer["requests"] == REQUESTS, f"{what}: every request has its first token ({len(ttft)})")
        check(all(o["seconds"] > 0 and o["queue_s"] >= 0 for o in ttft), f"{what}: TTFTs positive, queues not negative")
        check(m["verified_bytes"] > 0, f"{what}: the pages were verified ({m['verified_bytes']} bytes)")
        verdict = os.path.join(work, f"check_{layers}_{load}.json")
        c = run("check", "--plan", plan, "--replica", "0", "--measured", measured, "--json", verdict)
        check(c.returncode in (0, 1), f"{what}: check gives a verdict (exit {c.returncode})" +
              ("" if c.returncode in (0, 1) else ": " + c.stderr.strip()[-300:]))
        if c.returncode not in (0, 1):
            continue
        with open(verdict) as f:
            s = json.load(f)["serving"]
        check(s["passes"]["count"] == trailer["passes"] and s["ttft"]["count"] == REQUESTS
              and all(s["ttft"][p]["predicted_s"] > 0 and s["ttft"][p]["measured_s"] > 0 for p in ("p50", "p90", "p99"))
              and s["queue_mean"]["measured_s"] >= 0 and len(s["ttft_points"]) == REQUESTS,
              f"{what}: the verdict has the pass errors, TTFT p50/p90/p99, the queue and a point per request")
        worst = s.get("worst_passes", [])
        check(len(worst) == min(5, trailer["passes"]) and
              all(w["tokens"] > 0 and w["chunks"] >= 1 for w in worst) and
              s["pass_ratio"]["q1"] <= s["pass_ratio"]["median"] <= s["pass_ratio"]["q3"],
              f"{what}: the verdict names the passes furthest off and the per-pass bias")
        # The pass-by-pass table of the same run (tools/serving_passes.py): a row per pass, each
        # with its prediction, and the epoch on the wall clock that places the run beside a
        # clock log.
        table = os.path.join(work, f"passes_{layers}_{load}.csv")
        t = subprocess.run(["python3", os.path.join(src, "tools/serving_passes.py"), "--measured", measured,
                            "--check", verdict, "--csv", table], capture_output=True, text=True, timeout=60)
        rows = []
        if t.returncode == 0:
            with open(table) as f:
                rows = list(csv.DictReader(f))
        check(t.returncode == 0 and len(rows) == trailer["passes"] and
              all(float(r["predicted_s"]) > 0 for r in rows) and "measured / predicted" in t.stdout,
              f"{what}: tools/serving_passes.py gives a row per pass ({len(rows)})" +
              ("" if t.returncode == 0 else f": {t.stderr.strip()[-300:]}"))
        # Each row's prefix: the largest cached prefix its pass's forward ops attended over, so every
        # non-zero one is some op's prefix_tokens and the largest op's is some row's.
        row_prefixes = {int(r["prefix"]) for r in rows}
        op_prefixes = {o["prefix_tokens"] for o in m["ops"]
                       if o.get("kind") in ("compute", "chunk") and o.get("rank", 0) == 0}
        check(max(op_prefixes) > 0 and row_prefixes - {0} <= op_prefixes and
              max(row_prefixes) == max(op_prefixes) and "over a cached prefix" in t.stdout,
              f"{what}: tools/serving_passes.py gives each pass the prefix its chunks attended over "
              f"({sorted(row_prefixes)} against {sorted(op_prefixes)})")
        check(m["context"]["ranks"][0]["epoch_unix_s"] > 1.6e9,
              f"{what}: the measured file places its epoch on the wall clock")
        # A clock log with two samples in the longest pass (1,500 and 1,700 MHz, the second under
        # the power cap) and one before the run: that pass's row averages its two. (Host passes
        # last microseconds: the stamps carry microseconds, where nvidia-smi's carry milliseconds.)
        first = max(passes, key=lambda o: o["end_s"] - o["start_s"])
        at = m["context"]["ranks"][0]["epoch_unix_s"] + (first["start_s"] + first["end_s"]) / 2
        half = (first["end_s"] - first["start_s"]) / 4
        stamp = lambda u: datetime.datetime.fromtimestamp(u, datetime.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")
        smi = os.path.join(work, f"smi_{layers}_{load}.csv")
        with open(smi, "w") as f:
            f.write("timestamp, clocks.current.sm [MHz], power.draw.instant [W], clocks_event_reasons.active\n")
            f.write(f"{stamp(at - 1e4)}, 345 MHz, 70.00 W, 0x0000000000000001\n")
            f.write(f"{stamp(at - half)}, 1500 MHz, 600.00 W, 0x0000000000000000\n")
            f.write(f"{stamp(at + half)}, 1700 MHz, 700.00 W, 0x0000000000000004\n")
        t = subprocess.run(["python3", os.path.join(src, "tools/serving_passes.py"), "--measured", measured,
                            "--smi", smi, "--csv", table], capture_output=True, text=True, timeout=60)
        rows = []
        if t.returncode == 0:
            with open(table) as f:
                rows = {int(r["pass"]): r for r in csv.DictReader(f)}
        row = rows.get(first["pass"], {})
        check(row.get("samples") == "2" and abs(float(row.get("sm_mhz") or 0) - 1600) < 1e-6
              and abs(float(row.get("capped") or 0) - 0.5) < 1e-9,
              f"{what}: tools/serving_passes.py --smi places the clock samples in their pass ({row})")

finish()
