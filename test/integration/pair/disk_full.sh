#!/usr/bin/env bash
# A full disk, told before it fails (--min-free-space, issue 28): each side on a small tmpfs of its own.
# 1. the primary: with the free space under the watermark /ready answers 503 low_disk_space and a publish 507
#    (nothing stored, no seq taken); storage_failed is logged once however many publishes and checks come;
#    once space is freed /ready answers 200 again without any publish, storage_recovered once, and the seqs
#    go on without a gap;
# 2. the secondary: under the watermark /ready and /health answer 503 and a post 503 (the primary keeps its
#    messages and retries); one storage_failed line, however often the primary retries (it used to alternate
#    with storage_recovered while the disk stayed full); once space is freed everything is delivered;
# 3. a limit statvfs cannot see (a file-size limit, like a quota): once a publish fails, /ready stays 503
#    while a message of the largest size cannot be stored (its probe writes that much; a one-page probe used to
#    pass and declare the store recovered), and 200 once it can.
source "$(dirname "$0")/mountns.sh"
source "$(dirname "$0")/lib.sh"
LOG_PIPE=1   # part 3 limits the primary's file size: its log must not be a file it writes
ready_of() { curl -s -m 5 -w ' %{http_code}' "http://127.0.0.1:$1/ready"; }
ready_is() { [ "$(ready_of "$1" | awk '{print $NF}')" = "$2" ]; }
count_events() { grep -c "\"event\":\"$2\"" "$1" || true; }

mount_tmpfs "$WORK/pdisk" 24
PDATA="$WORK/pdisk/pdata"
start_secondary
start_primary --min-free-space 8MiB
publish 5 s
r=$(ready_of "$PPORT"); [ "$r" = '{"status":"ready"} 200' ] || fail "/ready with room on the disk: $r"
fill_disk "$WORK/pdisk" $((4 << 20))
wait_for 5 "the primary's /ready answering 503 with the disk under the watermark" ready_is "$PPORT" 503
json_is "$(ready_of "$PPORT" | sed 's/ [0-9]*$//')" 'j["status"] == "low_disk_space" and j["min_free_space"] == 8 << 20 and j["available"] < 8 << 20' \
  || fail "/ready does not say why: $(ready_of "$PPORT")"
for i in 1 2 3 4; do
  code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST "${CT[@]}" -d "{\"full\":$i}" "http://127.0.0.1:$PPORT/publish?stream=s")
  [ "$code" = 507 ] || fail "a publish under the watermark: expected 507, got $code $(cat "$WORK/body")"
done
json_is "$(cat "$WORK/body")" '"insufficient storage" in j["error"] and "--min-free-space" in j["error"]' \
  || fail "the 507 does not say why: $(cat "$WORK/body")"
json_is "$(status_json)" 'j["next_seq"]["s"] == 6' || fail "a refused publish took a seq: $(status_json)"
ready_is "$PPORT" 503 || fail "/ready came back while the disk is still full"
[ "$(count_events "$WORK/primary.log" storage_failed)" = 1 ] || fail "storage_failed logged $(count_events "$WORK/primary.log" storage_failed) times (once a transition)"
log_has "$WORK/primary.log" storage_failed error="low disk space" || fail "storage_failed does not name the low disk space"
[ "$(metric "$PPORT" steadfast_primary_storage_ok)" = 0 ] || fail "steadfast_primary_storage_ok is not 0 under the watermark"
# /health stays 200 (the process works; a restart would not free space) and names the store's state.
health_of() { curl -s -m 5 -w ' %{http_code}' "http://127.0.0.1:$1/health"; }
h=$(health_of "$PPORT"); [ "${h##* }" = 200 ] || fail "the primary's /health under the watermark: $h"
json_is "${h% *}" 'j["storage"] == "low_disk_space"' || fail "the primary's /health does not name the low disk: $h"
rm "$WORK/pdisk/fill"
# Back without a publish: the watermark is checked every second.
wait_for 5 "the primary's /ready answering 200 once space is freed" ready_is "$PPORT" 200
h=$(health_of "$PPORT"); json_is "${h% *}" 'j["storage"] == "ok"' || fail "the primary's /health once space is freed: $h"
[ "$(count_events "$WORK/primary.log" storage_recovered)" = 1 ] || fail "storage_recovered logged $(count_events "$WORK/primary.log" storage_recovered) times"
publish 5 s
wait_drained 30
verify s

# 2. The secondary's disk.
stop "$PPID_"; stop "$SPID"
mount_tmpfs "$WORK/sdisk" 24
SDATA="$WORK/sdisk/sdata"; PDATA="$WORK/pdata2"  # the primary back on the ordinary disk
start_secondary --min-free-space 8MiB
start_primary
r=$(ready_of "$SPORT"); [ "$r" = '{"status":"ready"} 200' ] || fail "the secondary's /ready with room: $r"
fill_disk "$WORK/sdisk" $((4 << 20))
wait_for 5 "the secondary's /ready answering 503 under the watermark" ready_is "$SPORT" 503
json_is "$(ready_of "$SPORT" | sed 's/ [0-9]*$//')" 'j["status"] == "low_disk_space"' || fail "the secondary's /ready: $(ready_of "$SPORT")"
code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' "http://127.0.0.1:$SPORT/health")
[ "$code" = 503 ] || fail "the secondary's /health under the watermark: $code $(cat "$WORK/body")"
post=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST "${CT[@]}" -d '{"id":"d-1","stream":"direct","seq":1,"payload":1}' \
  "http://127.0.0.1:$SPORT/api/messages")
[ "$post" = 503 ] || fail "a post under the watermark: expected 503, got $post $(cat "$WORK/body")"
publish 20 w
sleep 3  # the primary retries meanwhile
[ "$(pending)" -ge 20 ] || fail "the primary must keep what the secondary cannot store: $(status_json)"
[ "$(count_events "$WORK/secondary.log" storage_failed)" = 1 ] \
  || fail "the secondary logged storage_failed $(count_events "$WORK/secondary.log" storage_failed) times while full (once a transition)"
[ "$(count_events "$WORK/secondary.log" storage_recovered)" = 0 ] || fail "the secondary logged storage_recovered while still full"
rm "$WORK/sdisk/fill"
wait_for 5 "the secondary's /ready answering 200 once space is freed" ready_is "$SPORT" 200
wait_drained 60
verify w
[ "$(count_events "$WORK/secondary.log" storage_recovered)" = 1 ] || fail "storage_recovered logged $(count_events "$WORK/secondary.log" storage_recovered) times"

# 3. A file-size limit: room for small writes, none for a large message; the 503 names the cause (EFBIG).
stop "$PPID_"
PDATA="$WORK/pdata3"
start_primary --min-free-space 0
publish 3 q
biggest=$(find "$PDATA" -type f -printf '%s\n' | sort -n | tail -1)
prlimit --pid "$PPID_" --fsize=$((biggest + 300000)):unlimited || fail "prlimit"
python3 -c 'print("{\"pad\":\"" + "x" * 200000 + "\"}")' >"$WORK/big.json"
failed=0
for i in $(seq 1 12); do
  code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST "${CT[@]}" --data-binary "@$WORK/big.json" "http://127.0.0.1:$PPORT/publish?stream=q")
  [ "$code" = 503 ] && { failed=1; break; }
done
[ "$failed" = 1 ] || fail "no publish failed under a file-size limit of $((biggest + 300000)) bytes"
# The cause in the system's words, not only SQLite's "disk I/O error".
grep -q "File too large" "$WORK/body" || fail "the 503 does not say the file is too large: $(cat "$WORK/body")"
for i in 1 2 3; do
  r=$(ready_of "$PPORT")
  [ "${r##* }" = 503 ] || fail "/ready while a large message cannot be stored: $r (check $i)"
done
h=$(health_of "$PPORT"); json_is "${h% *}" 'j["storage"] == "storage_failed"' || fail "the primary's /health after a failed commit: $h"
prlimit --pid "$PPID_" --fsize=unlimited:unlimited || fail "prlimit"
wait_for 5 "the primary's /ready once the limit is lifted" ready_is "$PPORT" 200
echo "PASS"
