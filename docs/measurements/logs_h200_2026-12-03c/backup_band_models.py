# Backup models fitted on each round's own sweep (tail backups, runs 1/4/64, no gather), priced on
# that round's executor ops: one line (M0), bands of bytes per entry with one entry cost (M1), and
# (after "per-band") an entry cost and a bandwidth per band. From the checkout's root, with numpy:
#   /usr/bin/python3 docs/measurements/logs_h200_2026-12-03c/backup_band_models.py
import json,math,numpy as np,statistics as st,sys
rnds={'h17':('logs_h200_2026-12-03b/h17','103480 20831 28295'),'h16':('logs_h200_2026-12-03/h16','68144 78331 81497'),'h15':('logs_h200_2026-12-03/h15','54753 59097 6625')}
def load_sweep(dr,fw):
    fn={'model':'sweep_backups_model.json','synth':'sweep_copies_l4.json'}[fw]
    S=[]
    for x in json.load(open(f'docs/measurements/{dr}/{fn}'))['samples']:
        if x.get('kind')=='backup' and x['schedule']=='tail' and not x.get('host_slots') and not x.get('pool_order') and x.get('gather_pages',0)==0:
            runs=-(-x['pages']//x['run_pages'])
            S.append(dict(copies=x['copies'],entries=runs*x['layers'],bytes=x['bytes'],t=x['median_s'],pool=x['pool'],run=x['run_pages'],n=x['pages']))
    return S
def cols(s,model,edges):
    eb=s['bytes']/s['entries']
    if model=='M0': return [s['copies'],s['entries'],s['bytes']]
    if model=='M1':
        c=[s['copies'],s['entries']]
        k=sum(eb>e for e in edges); v=[0.0]*(len(edges)+1); v[k]=s['bytes']; return c+v
def fit(S,model,edges=()):
    A=np.array([cols(s,model,edges) for s in S]); t=np.array([s['t'] for s in S])
    W=A/t[:,None]; x,*_=np.linalg.lstsq(W,np.ones(len(t)),rcond=None); return x
def pred(x,s,model,edges=()): return float(np.dot(x,cols(s,model,edges)))
def ops(rnd,c,fw):
    dr=rnds[rnd][0]
    plan=[json.loads(l) for l in open(f'docs/measurements/heldout_{rnd}/plan_{rnd}_{c}_tail.jsonl')]
    L=plan[0]['layers']; runs={o['id']:o['page_runs'] for r in plan[1:] if 'ops' in r for o in r['ops'] if o['kind']=='backup'}
    m=json.load(open(f'docs/measurements/{dr}/measured_{rnd}_{c}_tail_{fw}.json'))
    return [dict(copies=1,entries=len(runs[o['id']])*L,bytes=o['bytes'],t=o['seconds'],pool=o['id'].split('/')[-1],n=o['pages']) for o in m['ops'] if o['kind']=='backup']
variants=[('M0',()),('M1',(65536,)),('M1',(131072,)),('M1',(65536,1<<20)),('M1',(32768,262144,1<<21))]
if len(sys.argv)>1 and sys.argv[1]=='run64': sel=lambda S:[s for s in S if s['run']>=s['n'] or s['run']==64]
else: sel=lambda S:S
for rnd,(dr,plans) in rnds.items():
  for fw in ['model','synth']:
    S=sel(load_sweep(dr,fw))
    for mv,edges in variants:
        x=fit(S,mv,edges)
        swerr=[abs(pred(x,s,mv,edges)/s['t']-1) for s in S]
        line='%s %-5s %s%-22s sweep med %4.1f%% |'%(rnd,fw,mv,str(edges),100*st.median(swerr))
        for c in plans.split():
            O=ops(rnd,c,fw)
            for pool in ['kv','indexer']:
                e=[pred(x,o,mv,edges)/o['t']-1 for o in O if o['pool']==pool]
                line+=' %s %s %+5.1f/%4.1f'%(c[:3],pool[:3],-100*st.median(e),100*st.median(abs(v) for v in e))
        print(line)
print('---- per-band entry cost and bandwidth')
def cols2(s,edges):
    eb=s['bytes']/s['entries']; k=sum(eb>e for e in edges)
    e=[0.0]*(len(edges)+1); b=[0.0]*(len(edges)+1); e[k]=s['entries']; b[k]=s['bytes']
    return [s['copies']]+e+b
def fit2(S,edges):
    A=np.array([cols2(s,edges) for s in S]); t=np.array([s['t'] for s in S])
    W=A/t[:,None]; x,*_=np.linalg.lstsq(W,np.ones(len(t)),rcond=None); return x
for edges in [(16384,131072,1<<20),(16384,65536,262144,1<<20),(16384,49152,98304,262144,1<<20)]:
  for rnd,(dr,plans) in rnds.items():
    for fw in ['model','synth']:
        S=load_sweep(dr,fw); x=fit2(S,edges)
        swerr=[abs(np.dot(x,cols2(s,edges))/s['t']-1) for s in S]
        line='%s %-5s %-32s sweep med %4.1f%% |'%(rnd,fw,str(edges),100*st.median(swerr))
        for c in plans.split():
            O=ops(rnd,c,fw)
            for pool in ['kv','indexer']:
                e=[np.dot(x,cols2(o,edges))/o['t']-1 for o in O if o['pool']==pool]
                line+=' %s %s %+5.1f/%4.1f'%(c[:3],pool[:3],-100*st.median(e),100*st.median(abs(v) for v in e))
        print(line)
