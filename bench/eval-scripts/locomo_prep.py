"""LoCoMo dev split -> cairn import JSONL (one episode per turn) and a recall --batch file.

Usage: locomo_prep.py OUT_DIR [FLOOR]"""
import json, os, re, sys, datetime
out=sys.argv[1] if len(sys.argv)>1 else '.'
os.makedirs(out, exist_ok=True)
floor=float(sys.argv[2]) if len(sys.argv)>2 else 0.0
d=json.load(open('/work/shared/eval/locomo/locomo-dev.json'))
def parse_date(s):
    return datetime.datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y")
mem=open(os.path.join(out,'mem.jsonl'),'w'); q=open(os.path.join(out,'q.jsonl'),'w'); gold=open(os.path.join(out,'gold.jsonl'),'w')
for c in d:
    conv=c['conversation']; sid=c['sample_id']; last=None
    n=1
    while f'session_{n}' in conv:
        t=parse_date(conv[f'session_{n}_date_time'])
        last=t if last is None or t>last else last
        for i,turn in enumerate(conv[f'session_{n}']):
            body=f"{turn['speaker']}: {turn['text']}"
            if turn.get('blip_caption'): body+=f" [image: {turn['blip_caption']}]"
            ts=(t+datetime.timedelta(seconds=i)).strftime('%Y-%m-%dT%H:%M:%SZ')
            mem.write(json.dumps({"type":"episode","body":body,"external_id":turn['dia_id'],"created_at":ts,"project":sid})+"\n")
        n+=1
    asof=(last+datetime.timedelta(days=1)).strftime('%Y-%m-%dT%H:%M:%SZ')
    for qa in c['qa']:
        if qa['category'] not in (1,2,3,4): continue
        ev=[]
        for e in qa['evidence']:
            for p in re.split(r'[;,]', e):
                p=p.strip()
                if re.fullmatch(r'D\d+:\d+', p): ev.append(p)
        q.write(json.dumps({"query":qa['question'],"limit":50,"project":sid,"as_of":asof,"mode":"lexical","floor":floor})+"\n")
        gold.write(json.dumps({"ev":ev,"cat":qa['category']})+"\n")
