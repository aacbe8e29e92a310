# Each backup op of rounds H15-H19's measured files (development data) against a profile: predicted / measured - 1,
# grouped by forward pass, pool, schedule and pages (power-of-two bins). From the checkout's root: python3 THIS [PROFILE]
import json, subprocess, sys, collections, statistics as st
rounds = [("h15","logs_h200_2026-12-03/h15","54753 59097 6625"),("h16","logs_h200_2026-12-03/h16","68144 78331 81497"),
          ("h17","logs_h200_2026-12-03b/h17","103480 20831 28295"),("h18","logs_h200_2026-12-03c/h18","31963 40567 42659"),
          ("h19","logs_h200_2026-12-03c/h19","44262 44974 58081")]
prof = sys.argv[1] if len(sys.argv)>1 else "config/profiles/h200_measured_model_l4.yaml"
rows=[]
for rnd,d,plans in rounds:
  for c in plans.split():
    for f in ("model","synth"):
      m=f"docs/measurements/{d}/measured_{rnd}_{c}_tail_{f}.json"; p=f"docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl"
      try: open(m)
      except: continue
      sc=["--compute-scale","0.01"] if f=="synth" else []
      subprocess.run(["./build/kvlanes","check","--plan",p,"--measured",m,*sc,"--profile",prof,"--json","/tmp/bk.json"],capture_output=True)
      pts={x["id"]:x for x in json.load(open("/tmp/bk.json"))["points"]}
      ops={}
      for i,l in enumerate(open(p)):
        if i==0: continue
        for o in json.loads(l).get("ops",[]): ops[o["id"]]=o
      for id,x in pts.items():
        if x["kind"]!="backup": continue
        o=ops[id]; pages=sum(r[-1] for r in o["page_runs"]); runs=len(o["page_runs"])
        rows.append(dict(rnd=rnd,c=c,f=f,pool=o["pool"],sched=o["schedule"],pages=pages,runs=runs,bytes=o["bytes"],
                         err=(x["predicted_s"]-x["measured_s"])/x["measured_s"],ms=x["measured_s"]))
json.dump(rows,open("/tmp/bkrows.json","w"))
g=collections.defaultdict(list)
def pb(n):
  for b in (1,2,4,8,16,32,64,128,256,1<<30):
    if n<=b: return b
for r in rows: g[(r["f"],r["pool"],r["sched"],pb(r["pages"]))].append(r["err"])
for k in sorted(g):
  v=g[k]; print(k, len(v), "median %+.1f%%  p-abs95 %.1f%%"%(100*st.median(v), 100*sorted(abs(x) for x in v)[int(0.95*(len(v)-1))]))
a=[abs(r["err"]) for r in rows]; print("all", len(a), st.median(a), sorted(a)[int(.95*(len(a)-1))])
