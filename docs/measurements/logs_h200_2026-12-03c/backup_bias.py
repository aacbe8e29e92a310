# Signed backup error per plan, forward pass and pool (measured / predicted - 1) on rounds H15-H17's
# measured files, and its correlation with features of the op. First make the checks against the
# profile under study, e.g. for each plan C of round R, forward F:
#   kvlanes check --plan docs/measurements/heldout_R/plan_R_C_tail.jsonl --measured .../measured_R_C_tail_F.json \
#     [--compute-scale 0.01] --profile P --json /tmp/backup_bias_chk/R_C_F.json
# then, from the checkout's root: python3 docs/measurements/logs_h200_2026-12-03c/backup_bias.py
import json,glob,math,statistics as st,sys
rows=[]
sets=[("h15","logs_h200_2026-12-03/h15","54753 59097 6625"),("h16","logs_h200_2026-12-03/h16","68144 78331 81497"),("h17","logs_h200_2026-12-03b/h17","103480 20831 28295")]
for rnd,dr,plans in sets:
  for c in plans.split():
    plan=[json.loads(l) for l in open(f'docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl')]
    hdr=plan[0]; H=hdr['host_pages_per_lane']
    runs={}; comp={}
    for r in plan[1:]:
      if 'ops' not in r: continue
      for o in r['ops']:
        if o['kind']=='backup': runs[o['id']]=o['page_runs']
        if o['kind']=='compute': comp[r['request']]=o['new_tokens']
    for f in ['model','synth']:
      chk=json.load(open(f"/tmp/backup_bias_chk/{rnd}_{c}_{f}.json"))
      for p in chk['points']:
        if p['kind']!='backup': continue
        pool=p['id'].split('/')[-1]; pr=runs[p['id']]
        n=sum(x[2] for x in pr); d0=pr[0][0]; h0=pr[0][1]
        chunk=64*(132 if pool=='indexer' else 656)
        rows.append(dict(rnd=rnd,plan=c,fwd=f,pool=pool,n=n,nruns=len(pr),d0=d0,h0=h0,H=H,chunk=chunk,req=int(p['id'].split('/')[0]),
                         dev=p['measured_s']/p['predicted_s']-1,meas=p['measured_s'],pred=p['predicted_s']))
json.dump(rows,open('/tmp/backup_bias_rows.json','w'))
print(len(rows))
def corr(a,b):
  ma,mb=st.mean(a),st.mean(b); sa=math.sqrt(sum((x-ma)**2 for x in a)); sb=math.sqrt(sum((y-mb)**2 for y in b))
  return sum((x-ma)*(y-mb) for x,y in zip(a,b))/(sa*sb) if sa and sb else float('nan')
for pool in ['indexer','kv']:
  R=[r for r in rows if r['pool']==pool and r['nruns']==1]
  print(pool,len(R),'median dev %.2f%%'%(100*st.median(r['dev'] for r in R)))
  dev=[r['dev'] for r in R]
  feats={
   'log n':[math.log(r['n']) for r in R],
   'h0 byte mod 2M':[(r['h0']*r['chunk'])%(2<<20) for r in R],
   'h0 byte mod 64K':[(r['h0']*r['chunk'])%(64<<10) for r in R],
   'h0 byte mod 4K':[(r['h0']*r['chunk'])%(4096) for r in R],
   'end mod 4K':[((r['h0']+r['n'])*r['chunk'])%(4096) for r in R],
   'h0':[r['h0'] for r in R],'d0':[r['d0'] for r in R],
   'd0 byte mod 2M':[(r['d0']*r['chunk'])%(2<<20) for r in R],
   'req':[r['req'] for r in R],
   'synth':[r['fwd']=='synth' for r in R],
   '2M crossings/n':[((r['h0']+r['n'])*r['chunk']//(2<<20)-r['h0']*r['chunk']//(2<<20))/r['n'] for r in R],
  }
  for k,v in feats.items(): print('  %-18s corr %+.3f'%(k,corr(v,dev)))
# Per plan, forward pass and pool: the ops' pages, the median signed error and the median APE.
from collections import defaultdict
g = defaultdict(list)
for r in rows: g[(r['rnd'], r['plan'], r['fwd'], r['pool'])].append(r)
for k, v in sorted(g.items()):
    ns = sorted(r['n'] for r in v)
    print(k, 'n %d-%d' % (ns[0], ns[-1]), 'count', len(v), 'median signed %+.1f%%' % (100 * st.median(r['dev'] for r in v)),
          'APE med %.1f' % (100 * st.median(abs(r['dev']) for r in v)))
