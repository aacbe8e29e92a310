# Gathers of rounds H15-H17 (development data) priced three ways from the two-GPU profile's checks
# (/tmp/backup_bias_chk, as backup_bias.py says): A as priced (the first_gather ratio on every
# layer), B the ratio on layer 0 and the sweep's next-layer ratio (next_s / median_s) on layers
# 1-3, C the next-layer ratio on every layer. python3 docs/measurements/logs_h200_2026-12-03c/gather_layer_position.py
import json,math,re,statistics as st,subprocess
rat={}
for g in ['h15','h16']:
    for kind in ['synth','model']:
        d=json.load(open(f'docs/measurements/logs_h200_2026-12-03/{g}/sweep_pairs_{kind}.json'))
        for x in d['samples']:
            if x.get('kind')=='first_gather':
                rat.setdefault((kind,x['pages']),[]).append(x['next_s']/x['median_s'])
src=open('docs/measurements/profiles/h200_measured_model_l4_2026-12-03b.yaml').read()
def table(key):
    m=re.search(r'  %s: \[(.*)\]\n'%key,src)
    return [(int(p),float(r)) for p,r in re.findall(r'\{pages: (\d+), ratio: ([0-9.e-]+)\}',m.group(1))]
def interp(t,P):
    if P<=t[0][0]: return t[0][1]
    if P>=t[-1][0]: return t[-1][1]
    for (p0,r0),(p1,r1) in zip(t,t[1:]):
        if p0<=P<=p1:
            a=math.log(P/p0)/math.log(p1/p0); return r0+a*(r1-r0)
T={'synth':table('gather_after_forward_synthetic'),'model':table('gather_after_forward')}
N={k:[(p,r*st.median(rat[(k,p)])) for p,r in T[k]] for k in T}
def pct(v,q):
    v=sorted(v); i=q*(len(v)-1); lo=int(math.floor(i)); hi=min(lo+1,len(v)-1); return v[lo]+(i-lo)*(v[hi]-v[lo])
for r in ["h15:logs_h200_2026-12-03/h15:54753 59097 6625","h16:logs_h200_2026-12-03/h16:68144 78331 81497","h17:logs_h200_2026-12-03b/h17:103480 20831 28295"]:
    rnd,dr,plans=r.split(':')
    for c in plans.split():
        for f in ['model','synth']:
            chk=f'/tmp/backup_bias_chk/{rnd}_{c}_{f}.json'
            meas=json.load(open(f'docs/measurements/{dr}/measured_{rnd}_{c}_tail_{f}.json'))
            pages={o['id']:o['pages'] for o in meas['ops'] if o['kind']=='gather'}
            d=json.load(open(chk))
            res={'A':[],'B':[],'C':[]}; Ps=[]
            for p in d['points']:
                if p['kind']!='gather': continue
                P=pages[p['id']]; Ps.append(P)
                rf=interp(T[f],P); rn=interp(N[f],P)
                a=p['predicted_s']; b=a*(rf+3*rn)/(4*rf); cc=a*rn/rf
                for k,v in zip('ABC',(a,b,cc)): res[k].append(v/p['measured_s']-1)
            s=' '.join('%s %+5.1f(med|%4.1f p95|%4.1f)'%(k,100*st.median(v),100*st.median([abs(x) for x in v]),100*pct([abs(x) for x in v],.95)) for k,v in res.items())
            print('%s %6s %s pages %4d-%4d  %s'%(rnd,c,f,min(Ps),max(Ps),s))
