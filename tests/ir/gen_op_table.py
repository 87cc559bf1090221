#!/usr/bin/env python3
# Prints the op reference tables of docs/IR.md from ir/Ops.def (run from the repository root:
# python3 tests/ir/gen_op_table.py). DocTest.cpp checks that every op has a row.
import re
src=open('ir/Ops.def').read()
body=src.split('#endif',1)[1]
out=[]
flagnames={'kElementwise':'elementwise','kUnary':'unary','kBinary':'binary','kTernary':'ternary','kCommutative':'commutative','kComparison':'comparison','kReduction':'reduction','kMovement':'movement','kContraction':'contraction','kWindow':'window','kSource':'source','kRandom':'random','kComposite':'composite','kLoss':'loss'}
for m in re.finditer(r'// ---- ([^-]+?) -+|KILN_OP\(', body):
    if m.group(0).startswith('//'):
        out.append(('sec',m.group(1).strip())); continue
    j=m.end(); depth=1; args=[]; cur=''; instr=False
    while depth>0:
        c=body[j]
        if instr:
            cur+=c
            if c=='\\': cur+=body[j+1]; j+=1
            elif c=='"': instr=False
        elif c=='"': instr=True; cur+=c
        elif c=='(': depth+=1; cur+=c
        elif c==')':
            depth-=1
            if depth>0: cur+=c
        elif c==',' and depth==1: args.append(cur.strip()); cur=''
        else: cur+=c
        j+=1
    args.append(cur.strip())
    def s(x): return ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', x))
    out.append(('op',s(args[1]),args[2],args[3],args[4],s(args[5]),s(args[7])))
BAR=' \\| '
for e in out:
    if e[0]=='sec':
        print("\n### " + e[1][0].upper()+e[1][1:] + "\n")
        print("| op | operands | attributes | flags | semantics |")
        print("|---|---|---|---|---|")
        continue
    _,name,mn,mx,flags,schema,doc=e
    ops = mn if mn==mx else (mn+"+" if mx=='-1' else mn+"–"+mx)
    items=[];d=0;c=''
    for ch in schema:
        if ch in '[{': d+=1
        if ch in ']}': d-=1
        if ch==',' and d==0: items.append(c); c=''
        else: c+=ch
    if c: items.append(c)
    attrs=[]
    for it in items:
        nm,rest=it.split(':',1)
        dflt=None
        if '=' in rest: rest,dflt=rest.split('=',1)
        kind=rest
        if '{' in rest:
            k,choices=rest.split('{'); choices=choices.rstrip('}')
            kind='str {' + choices.replace('|',BAR) + '}'
        a="`"+nm+"`: "+kind
        if dflt is not None:
            if kind.startswith('str'): dflt='"'+dflt+'"'
            a+=" = `"+dflt+"`"
        attrs.append(a)
    fl=[flagnames[f.strip()] for f in flags.split('|') if f.strip()!='0']
    doc=doc.replace('|','\\|').replace('*','\\*')
    print("| `%s` | %s | %s | %s | %s |" % (name, ops, '<br>'.join(attrs) if attrs else '—', ', '.join(fl) if fl else '—', doc))
