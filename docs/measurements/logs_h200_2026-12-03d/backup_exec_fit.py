# Backup terms fitted on the executor's own ops (rounds H15-H19's measured files, per forward pass and pool:
# latency + per band of bytes per entry an entry cost and a bandwidth, least squares on relative error),
# priced on rounds H20-H21's ops beside the committed profile. Needs numpy (/usr/bin/python3). From the root:
#   /usr/bin/python3 THIS
import json, subprocess, collections, statistics as st, numpy as np
R = [("h15","logs_h200_2026-12-03/h15","54753 59097 6625"),("h16","logs_h200_2026-12-03/h16","68144 78331 81497"),
     ("h17","logs_h200_2026-12-03b/h17","103480 20831 28295"),("h18","logs_h200_2026-12-03c/h18","31963 40567 42659"),
     ("h19","logs_h200_2026-12-03c/h19","44262 44974 58081"),("h20","logs_h200_2026-12-03d/h20","60493 66710 70713"),
     ("h21","logs_h200_2026-12-03d/h21","80122 87928 104297")]
prof="config/profiles/h200_measured_model_l4.yaml"
files=[]
for rnd,d,plans in R:
  for c in plans.split():
    for f in ("model","synth"):
      m=f"docs/measurements/{d}/measured_{rnd}_{c}_tail_{f}.json"; p=f"docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl"
      try: open(m)
      except: continue
      sc=["--compute-scale","0.01"] if f=="synth" else []
      subprocess.run(["./build/kvlanes","check","--plan",p,"--measured",m,*sc,"--profile",prof,"--json","/tmp/ex.json"],capture_output=True)
      pts={x["id"]:x for x in json.load(open("/tmp/ex.json"))["points"] if x["kind"]=="backup"}
      ops={}
      for i,l in enumerate(open(p)):
        if i: 
          for o in json.loads(l).get("ops",[]): ops[o["id"]]=o
      rows=[]
      for id,x in pts.items():
        o=ops[id]; runs=len(o["page_runs"]); pages=sum(r[-1] for r in o["page_runs"])
        rows.append(dict(pool=o["pool"],entries=4*runs,bytes=o["bytes"],bpe=o["bytes"]/(4*runs),ms=x["measured_s"],pred=x["predicted_s"]))
      files.append((rnd,c,f,rows))
json.dump(files,open("/tmp/exfiles.json","w"))
B=[16384,131072,1048576,1e18]
def band(b): return next(i for i,x in enumerate(B) if b<=x)
def fit(rows):
  A=[];y=[]
  for r in rows:
    v=[1.0]+[0.0]*8; k=band(r["bpe"]); v[1+2*k]=r["entries"]; v[2+2*k]=r["bytes"]
    A.append([a/r["ms"] for a in v]); y.append(1.0)
  A=np.array(A); keep=A.any(axis=0); x=np.zeros(9)
  x[keep]=np.linalg.lstsq(A[:,keep],np.array(y),rcond=None)[0]; return x
def pred(x,r):
  k=band(r["bpe"]); return x[0]+x[1+2*k]*r["entries"]+x[2+2*k]*r["bytes"]
train=[f for f in files if f[0] in ("h15","h16","h17","h18","h19")]
test=[f for f in files if f[0] in ("h20","h21")]
models={}
for fw in ("model","synth"):
  for pool in ("kv","indexer"):
    models[(fw,pool)]=fit([r for f in train if f[2]==fw for r in f[3] if r["pool"]==pool])
def stats(errs): a=sorted(errs); return 100*st.median(a), 100*a[min(len(a)-1,int(np.ceil(0.95*len(a)))-1)]
for rnd,c,fw,rows in test:
  e0=[abs(r["pred"]-r["ms"])/r["ms"] for r in rows]
  e1=[abs(pred(models[(fw,r["pool"])],r)-r["ms"])/r["ms"] for r in rows]
  print(rnd,c,fw,"committed %.2f / %.2f"%stats(e0),"  exec-fit %.2f / %.2f"%stats(e1))
