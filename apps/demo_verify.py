#!/usr/bin/env python3
# The demos' verification (apps/demo.sh, apps/demo-jetstream.sh): every order
# applied exactly once, in publish order, with the payload text byte for byte
# as the publisher wrote it; nothing pending and no dead letter at the primary.
#   demo_verify.py DUMP_FILE N PRIMARY_STATUS_JSON RETRIES
import json, re, sys
n, retries = int(sys.argv[2]), sys.argv[4]
try:
    status = json.loads(sys.argv[3])
except ValueError:
    status = {}
ok = True
def check(what, good, detail=""):
    global ok
    ok = ok and good
    print(f"  {what}: {'yes' if good else 'NO'}" + (f"  ({detail})" if detail and not good else ""))
# The dump: one JSON object a line, "payload" last; the payload's raw text is compared.
rows, bad = [], []
try:
    text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
except OSError as e:
    text, bad = "", [str(e)]
for k, line in enumerate(text.splitlines(), 1):
    if not line.strip():
        continue
    try:
        row = json.loads(line)
        m = re.search(r'"payload"\s*:', line)
        raw = line[m.end():line.rindex("}")].strip(" \t\r\n")
        if json.loads(raw) != row["payload"]:
            raise ValueError("payload is not the last key")
        rows.append((row["stream"], row["seq"], row["id"], raw))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        bad.append(f"line {k}: {e}: {line[:120]}")
expected = ['{"order":%d,"item":"sku-%d","qty":%d}' % (i, i % 97, i % 5 + 1) for i in range(1, n + 1)]
seqs = [r[1] for r in rows]
ids = [r[2] for r in rows]
print(f"verification: {len(rows)} applied at the secondary, {n} published, "
      f"{status.get('pending', '?')} pending at the primary")
check("the dump reads", not bad, "; ".join(bad[:3]))
check(f"exactly once (seqs 1..{n} of one stream, unique ids)",
      seqs == list(range(1, n + 1)) and len(set(ids)) == len(ids) and len({r[0] for r in rows}) <= 1,
      f"{len(rows)} rows, seqs begin {seqs[:5]}, {len(ids) - len(set(ids))} repeated ids")
orders = []
for r in rows:
    m = re.match(r'\{\s*"order"\s*:\s*(\d+)\s*[,}]', r[3])
    orders.append(int(m.group(1)) if m else None)
first = next((k for k, o in enumerate(orders) if o != k + 1), None)
check("each order once, in publish order", orders == list(range(1, n + 1)),
      (f"first wrong at row {first + 1}: order {orders[first]}" if first is not None
       else f"{len(orders)} rows for {n} orders"))
diff = [k for k, r in enumerate(rows) if k >= n or r[3] != expected[k]]
check("payloads byte for byte as sent", not diff and len(rows) == n,
      (f"{len(diff)} differ, e.g. row {diff[0] + 1} is {rows[diff[0]][3][:80]!r}, sent "
       f"{(expected[diff[0]] if diff[0] < n else 'nothing')!r}") if diff else f"{len(rows)} rows for {n}")
check("nothing pending at the primary", status.get("pending") == 0, f"status {json.dumps(status)}")
check("no dead letters", status.get("dead_letter", 0) == 0, f"dead_letter {status.get('dead_letter')}")
print(f"  retries it took: {retries}")
sys.exit(0 if ok else 1)
