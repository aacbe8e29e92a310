# Each gather op of rounds H15-H19's measured files (development data) against a profile: measured / predicted - 1
# in %, by pages a layer, per plan and forward pass. From the checkout's root: python3 THIS [PROFILE]
import json, subprocess, sys, collections, statistics as st
rounds = [("h15","logs_h200_2026-12-03/h15","54753 59097 6625"),("h16","logs_h200_2026-12-03/h16","68144 78331 81497"),
          ("h17","logs_h200_2026-12-03b/h17","103480 20831 28295"),("h18","logs_h200_2026-12-03c/h18","31963 40567 42659"),
          ("h19","logs_h200_2026-12-03c/h19","44262 44974 58081")]
prof = sys.argv[1] if len(sys.argv)>1 else "config/profiles/h200_measured_model_l4.yaml"
for rnd,d,plans in rounds:
  for c in plans.split():
    for f in ("model","synth"):
      m=f"docs/measurements/{d}/measured_{rnd}_{c}_tail_{f}.json"; p=f"docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl"
      try: open(m)
      except: continue
      sc=["--compute-scale","0.01"] if f=="synth" else []
      subprocess.run(["./build/kvlanes","check","--plan",p,"--measured",m,*sc,"--profile",prof,"--json","/tmp/ga.json"],capture_output=True)
      pts={x["id"]:x for x in json.load(open("/tmp/ga.json"))["points"]}
      ops={}
      for i,l in enumerate(open(p)):
        if i==0: continue
        for o in json.loads(l).get("ops",[]): ops[o["id"]]=o
      out=[]
      for id,x in pts.items():
        if x["kind"]!="gather": continue
        o=ops[id]
        pages=sum(r[-1] for r in o.get("page_runs",[])) or o.get("pages")
        out.append((pages, 100*(x["measured_s"]/x["predicted_s"]-1)))
      out.sort()
      print(rnd,c,f, ' '.join('%s:%+.1f'%(a,b) for a,b in out))
