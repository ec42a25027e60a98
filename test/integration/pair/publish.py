# The scenarios' publishers, in one process (a curl process a message cost
# about 40 ms of CPU each on a loaded 2-core machine, and the scenarios publish
# thousands). Every 202 is recorded in WORK/acks.STREAM as one line, written
# whole: "<the answer's JSON text> TAB <the exact body sent, as a JSON string>"
# (what `verify` in lib.sh reads; the line order does not matter to it).
#   publish.py PORT TOKEN WORK counted N STREAM     {"n":i}, i = 1..N, a connection each (as curl made them)
#   publish.py PORT TOKEN WORK parallel N STREAM    the same from 8 concurrent publishers, {"k":K,"i":i}
#   publish.py PORT TOKEN WORK streams N STREAM...  a publisher per STREAM (a stream named twice gets two),
#                                                   concurrent, keep-alive, N bodies each that a
#                                                   re-serializing store would change (spaces, 1.50, a
#                                                   23-digit integer, é raw and escaped)
#   publish.py PORT TOKEN WORK sized N STREAM...    as streams, with every fourth body over 6 KB (bigger than
#                                                   what joins a send window in memory: read back instead)
#                                                   and every third under an Idempotency-Key of its own
#   publish.py PORT TOKEN WORK file PATH STREAM     one message: PATH's bytes (any size or content)
# Exits 1 if any message was not acknowledged, saying which and why (a
# publisher stops at its first failure; the others go on).
import http.client, json, sys, threading

port, token, work, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = "Bearer " + token
errors = []
lock = threading.Lock()
files = {}

def record(stream, answer, body):
    line = answer + "\t" + json.dumps(body.decode("utf-8")) + "\n"
    with lock:
        if stream not in files:
            files[stream] = open(f"{work}/acks.{stream}", "a", encoding="utf-8")
        files[stream].write(line)
        files[stream].flush()

def publish(stream, bodies, who, keep_alive, timeout):
    c = None
    for i, body in enumerate(bodies, 1):
        h = headers
        if isinstance(body, tuple):  # (body, Idempotency-Key)
            body, key = body
            h = dict(headers, **{"Idempotency-Key": key})
        if c is None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("POST", "/publish?stream=" + stream, body=body, headers=h)
            r = c.getresponse()
            status, text = r.status, r.read().decode("utf-8", "replace")
        except Exception as e:
            errors.append(f"publish {i}{who} on stream {stream} was not acknowledged: 000 {e!r}")
            return
        finally:
            if not keep_alive:
                c.close()
                c = None
        if status != 202:
            errors.append(f"publish {i}{who} of {len(body)} bytes on stream {stream} was not acknowledged: {status} {text[:300]}")
            return
        record(stream, text, body)

def run(*args):
    try:
        publish(*args)
    except BaseException as e:  # a thread's exception would otherwise only be printed
        errors.append(f"the publisher{args[2]} on stream {args[0]} failed: {e!r}")

def mixed(stream, k, n, sized=False):
    for i in range(1, n + 1):
        extra = ', "pad": "%s"' % ("p" * 6000) if sized and i % 4 == 0 else ""
        body = ('{"s": "%s", "k": %d, "i": %d, "big": 1234567890123456789%04d, "f": 1.50, "t": "caf\\u00e9 café"%s}'
                % (stream, k, i, i, extra)).encode("utf-8")
        yield (body, "key-%s-%d-%d" % (stream, k, i)) if sized and i % 3 == 0 else body

if kind == "counted":
    n, stream = int(sys.argv[5]), sys.argv[6]
    jobs = [(stream, (b'{"n":%d}' % i for i in range(1, n + 1)), "", False, 30)]
elif kind == "parallel":
    n, stream = int(sys.argv[5]), sys.argv[6]
    jobs = [(stream, (b'{"k":%d,"i":%d}' % (k, i) for i in range(1, n // 8 + 1)), f" of publisher {k}", False, 30)
            for k in range(8)]
elif kind in ("streams", "sized"):
    n, streams = int(sys.argv[5]), sys.argv[6:]
    jobs = [(s, mixed(s, k, n, kind == "sized"), f" of publisher {k}", True, 60) for k, s in enumerate(streams)]
elif kind == "file":
    path, stream = sys.argv[5], sys.argv[6]
    jobs = [(stream, [open(path, "rb").read()], "", False, 60)]
else:
    sys.exit(f"publish.py: unknown kind {kind!r} (counted, parallel, streams, sized, file)")

threads = [threading.Thread(target=run, args=job) for job in jobs]
for t in threads: t.start()
for t in threads: t.join()
for f in files.values(): f.close()
if errors:
    print("; ".join(errors[:8]), file=sys.stderr)
    sys.exit(1)
