"""A replica of `cairn eval locomo` for screening ranking ideas in seconds.

It rebuilds what the eval does outside the engine: the same turns, the same FTS5 index
(Python's sqlite3, `porter unicode61`, BM25 weights 3/2/2/1, the engine's stop words read from
crates/cairn-core/src/query.rs), the same e5 vectors (read from the eval's `--cache` file, so a
full `cairn eval locomo --cache FILE` run must come first), and the same fusion and bounded
score. With the shipped settings it reproduces the eval's three modes to the third decimal
(docs/retrieval.md). Ideas that look good here are then implemented and measured by the eval
itself; the numbers in the docs are the eval's.

Usage: locomo_sim.py DATA CACHE [--k 10] [--context 0.3,0.3] [--speaker 1.1]
Needs numpy.
"""
import argparse, os
import json, re, sqlite3, hashlib, struct, math, datetime, sys, collections, os, pickle
import numpy as np

def _stop_words():
    here = os.path.dirname(os.path.abspath(__file__))
    source = open(os.path.join(here, '../../crates/cairn-core/src/query.rs')).read()
    block = source[source.index('pub const STOP_WORDS'):]
    block = block[:block.index('];')]
    return set(re.findall(r'"([^"]+)"', block))
STOP = _stop_words()
MODEL='multilingual-e5-small-q4'
def key(kind,text):
    h=hashlib.sha256(); h.update(MODEL.encode()); h.update(b'\0'); h.update(kind.encode()); h.update(b'\0'); h.update(text.encode()); return h.digest()
def load_cache(path):
    b=open(path,'rb').read(); assert b[:8]==b'CAIRNEC1'; dim=struct.unpack('<I',b[8:12])[0]
    ent=32+4*dim; out={}
    body=b[12:]
    for i in range(0,len(body),ent):
        out[body[i:i+32]]=np.frombuffer(body[i+32:i+ent],dtype='<f4')
    return out
def word_tokens(text):
    return [t.lower() for t in re.findall(r'[^\W_]+',text)]
def query_terms(q):
    toks=[]
    for t in word_tokens(q):
        if t not in toks: toks.append(t)
    c=[t for t in toks if t not in STOP]
    return c if c else toks
def parse_date(s):
    return datetime.datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y")
def evidence_ids(raw):
    out=[]
    for item in raw:
        if not isinstance(item,str): continue
        for part in re.split('[;,]',item):
            part=part.strip()
            m=re.fullmatch(r'D(\d+):(\d+)',part)
            if m: out.append(part)
    return out
def load(path):
    d=json.load(open(path))
    convs=[]
    for s in d:
        c=s['conversation']; turns=[]; i=1; last=None
        while f'session_{i}' in c:
            date=parse_date(c[f'session_{i}_date_time']); last=max(last,date) if last else date
            for j,t in enumerate(c[f'session_{i}']):
                body=f"{t['speaker']}: {t['text']}"
                if t.get('blip_caption'): body+=f" [image: {t['blip_caption']}]"
                body=body.strip()
                turns.append(dict(id=t['dia_id'],body=body,speaker=t['speaker'],text=t['text'],at=date+datetime.timedelta(seconds=j),session=i,idx=j))
            i+=1
        qs=[]
        for qa in s['qa']:
            cat=qa.get('category')
            if cat not in (1,2,3,4): continue
            ev=evidence_ids(qa.get('evidence',[]))
            if ev: qs.append(dict(q=qa['question'],ev=ev,cat=cat,answer=qa.get('answer')))
        convs.append(dict(id=s['sample_id'],turns=turns,qs=qs,as_of=last+datetime.timedelta(days=1),speakers=(c['speaker_a'],c['speaker_b'])))
    return convs
def emb_text(turns,i,before=2,window=3600):
    t=turns[i]; prev=[]
    j=i-1
    while j>=0 and len(prev)<before and (t['at']-turns[j]['at']).total_seconds()<=window:
        prev.append(turns[j]); j-=1
    prev.reverse()
    return ''.join(p['body']+'\n' for p in prev)+t['body']
def lexical(conn,q,limit=250,floor=0.1,terms=None):
    terms=terms if terms is not None else query_terms(q)
    terms=terms[:16]
    if not terms: return []
    expr=' OR '.join('"'+t.replace('"','""')+'"' for t in terms)
    rows=conn.execute('select rowid, -bm25(f,3.0,2.0,2.0,1.0) s from f where f match ? order by s desc, rowid limit ?',(expr,limit)).fetchall()
    if rows and floor>0 and rows[0][1]>0:
        top=rows[0][1]; rows=[r for r in rows if r[1]>=floor*top]
    return rows
def build(conv, fields=None):
    conn=sqlite3.connect(':memory:')
    conn.execute("create virtual table f using fts5(title,summary,tags,body,tokenize='porter unicode61')")
    for i,t in enumerate(conv['turns']):
        conn.execute('insert into f(rowid,title,summary,tags,body) values (?,?,?,?,?)',(i,None,None,'',t['body'] if fields is None else fields(conv['turns'],i)))
    return conn
def recall_at(ranked,ev,k):
    ev=set(ev); return len(ev & set(ranked[:k]))/len(ev)
def ndcg10(ranked,ev):
    ev=set(ev); dcg=sum(1/math.log2(i+2) for i,x in enumerate(ranked[:10]) if x in ev)
    ideal=sum(1/math.log2(i+2) for i in range(min(len(ev),10))); return dcg/ideal
def summarize(results):
    # results: list of (ranked ids, ev, cat)
    n=len(results)
    out={f'R@{k}':round(sum(recall_at(r,e,k) for r,e,c in results)/n,3) for k in (5,10,25,50)}
    out['NDCG']=round(sum(ndcg10(r,e) for r,e,c in results)/n,3)
    return out

def recency(t,as_of):
    age=(as_of-t['at']).total_seconds()/86400
    return max(0.5**(max(age,0)/45),0.9)
def final(cands, rec, ratio=None):
    # cands: dict id-> fused ; ratio: dict id-> strength (single-source ratio scale)
    if not cands: return []
    if ratio is not None:
        top=max(ratio.values())
        rel={i:0.35+0.65*max(0,min(1,ratio[i]/top)) for i in cands}
    else:
        top=max(cands.values())
        rel={i:0.35+0.65*min(1,cands[i]/top) for i in cands}
    sc={i:rel[i]*rec[i] for i in cands}
    return sorted(cands,key=lambda i:(-sc[i],i))
def rrf(lists,weights=None,K=60):
    f=collections.defaultdict(float)
    for s,l in enumerate(lists):
        w=1 if weights is None else weights[s]
        for r,(i,_) in enumerate(l): f[i]+=w/(K+r+1)
    return f
def prep(convs, cache, ctx_before=2):
    data=[]
    for conv in convs:
        T=conv['turns']
        conn=build(conv)
        M=np.stack([cache[key('passage',emb_text(T,i,ctx_before))] for i in range(len(T))])
        rec={i:recency(t,conv['as_of']) for i,t in enumerate(T)}
        for q in conv['qs']:
            qv=cache[key('query',q['q'])]
            sims=M@qv
            data.append(dict(conv=conv,conn=conn,M=M,rec=rec,q=q,sims=sims,lex=lexical(conn,q['q'])))
    return data

def same_session(T, i, j):
    return 0 <= j < len(T) and T[i]['session'] == T[j]['session']

def with_context(d, before, after, depth=250, lenders=50):
    """The engine's lexical conversation context: each of the best `lenders` hits lends
    `before` x its BM25 to the turn after it and `after` x to the turn before it; then the
    0.1 floor."""
    T = d['conv']['turns']
    full = lexical(d['conn'], d['q']['q'], limit=depth, floor=0)
    out = collections.defaultdict(float)
    for rank, (i, s) in enumerate(full):
        out[i] += s
        if rank >= lenders: continue
        if same_session(T, i, i + 1): out[i + 1] += before * s
        if same_session(T, i, i - 1): out[i - 1] += after * s
    l = sorted(out.items(), key=lambda x: (-x[1], x[0]))[:depth]
    top = l[0][1] if l else 0
    return [x for x in l if x[1] >= 0.1 * top]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('data'); ap.add_argument('cache')
    ap.add_argument('--k', type=float, default=10)
    ap.add_argument('--context', default='0.3,0.3')
    ap.add_argument('--speaker', type=float, default=1.1)
    a = ap.parse_args()
    before, after = (float(x) for x in a.context.split(','))
    convs = load(a.data); cache = load_cache(a.cache)
    res = {'lexical': [], 'semantic': [], 'hybrid': []}
    for d in prep(convs, cache):
        T = d['conv']['turns']; ids = lambda r: [T[i]['id'] for i in r]
        qt = set(word_tokens(d['q']['q']))
        named = {sp for sp in d['conv']['speakers'] if sp.lower() in qt}
        rec = {i: r * (a.speaker if T[i]['speaker'] in named else 1.0) for i, r in d['rec'].items()}
        lex = with_context(d, before, after) if (before or after) else d['lex']
        order = np.argsort(-d['sims'], kind='stable')[:250]
        sem = [(int(i), float(d['sims'][i])) for i in order]
        ev, cat = d['q']['ev'], d['q']['cat']
        res['lexical'].append((ids(final(rrf([lex], K=a.k), rec, ratio=dict(lex)))[:50], ev, cat))
        res['semantic'].append((ids(final(rrf([sem], K=a.k), rec))[:50], ev, cat))
        res['hybrid'].append((ids(final(rrf([lex, sem], K=a.k), rec))[:50], ev, cat))
    for mode, r in res.items():
        print(mode, summarize(r))

if __name__ == '__main__':
    main()
