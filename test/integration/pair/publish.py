# The scenarios' publisher: N messages {"n":i} (or {"k":K,"i":i} with
# --loops), one POST /publish each on a connection of its own (as curl made
# them), recording each acknowledgement as "ANSWER<TAB>BODY as a JSON string"
# in ACKS (with --loops: ACKS.pK per loop, K = 0..LOOPS-1, run concurrently).
# In one process: a curl process per message cost about 40 ms of CPU each on a
# loaded 2-core machine, and the scenarios publish about 2,000 messages.
#   publish.py PORT STREAM N ACKS TOKEN [--loops LOOPS]
# Exits 1 at the first message not acknowledged (202), saying which and why.
import http.client, json, sys, threading

port, stream, n, acks, token = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
loops = int(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[6] == "--loops" else 0
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = "Bearer " + token
errors = []

def run(count, body_of, path, who=""):
    try:
        publish(count, body_of, path, who)
    except BaseException as e:  # a thread's exception would otherwise only be printed
        errors.append(f"the publisher{who} on stream {stream} failed: {e!r}")

def publish(count, body_of, path, who):
    with open(path, "a", encoding="utf-8") as out:
        for i in range(1, count + 1):
            body = body_of(i)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                c.request("POST", "/publish?stream=" + stream, body=body.encode(), headers=headers)
                r = c.getresponse()
                status, text = r.status, r.read().decode("utf-8", "replace")
            except Exception as e:
                errors.append(f"publish {i}{who} on stream {stream} was not acknowledged: 000 {e!r}")
                return
            finally:
                c.close()
            if status != 202:
                errors.append(f"publish {i}{who} on stream {stream} was not acknowledged: {status} {text}")
                return
            out.write(text + "\t" + json.dumps(body) + "\n")
            out.flush()

if loops:
    per = n // loops
    threads = [threading.Thread(target=run, args=(per, lambda i, k=k: '{"k":%d,"i":%d}' % (k, i), f"{acks}.p{k}", f" of publisher {k}"))
               for k in range(loops)]
    for t in threads: t.start()
    for t in threads: t.join()
else:
    run(n, lambda i: '{"n":%d}' % i, acks)
if errors:
    print("; ".join(errors[:8]), file=sys.stderr)
    sys.exit(1)
