"""Scores a recall --batch answer file (a.jsonl) against gold.jsonl: recall@k and NDCG@10.

Usage: locomo_score.py DIR"""
import json,os,sys,math
d=sys.argv[1] if len(sys.argv)>1 else '.'
ans=[json.loads(l) for l in open(os.path.join(d,'a.jsonl'))]; gold=[json.loads(l) for l in open(os.path.join(d,'gold.jsonl'))]
ks=[5,10,25,50]; r={k:0 for k in ks}; ra={k:0 for k in ks}; nd=0; n=0
for a,g in zip(ans,gold):
    ev=set(g['ev'])
    if not ev: continue
    n+=1
    ids=[x['external_id'] for x in a['results']]
    for k in ks:
        hit=len(ev & set(ids[:k])); r[k]+=hit/len(ev); ra[k]+= (hit==len(ev))
    dcg=sum(1/math.log2(i+2) for i,x in enumerate(ids[:10]) if x in ev)
    idcg=sum(1/math.log2(i+2) for i in range(min(len(ev),10)))
    nd+=dcg/idcg
print(' '.join(f"r@{k}={r[k]/n:.3f}" for k in ks), f"ndcg@10={nd/n:.3f}", f"n={n}")
