#!/usr/bin/env bash
# scripts/operator-findings.sh — re-runs every operator finding of issue 17
# ("Operable in production") as an operator would, against a freshly built
# bucketlog and an S3 emulator on 127.0.0.1 (scripts/fakebucket: gofakes3
# behind a proxy the script takes down and brings back) or a file:// bucket
# where no S3 is needed. Each finding prints its commands and their output,
# then PASS or FAIL with what was expected; the script exits 1 when any
# finding regressed. Usage: scripts/operator-findings.sh [-v] (-v: full
# stderr of every command). Needs go, curl and jq; about 30 s.
set -uo pipefail
cd "$(dirname "$0")/.."
VERBOSE=0
[ "${1:-}" = "-v" ] && VERBOSE=1

for tool in go curl jq awk; do
  command -v "$tool" >/dev/null || { echo "operator-findings: needs $tool" >&2; exit 2; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/bucketlog-findings.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

go build -o "$T/bin/bucketlog" ./cmd/bucketlog || exit 1
go build -o "$T/bin/fakebucket" ./scripts/fakebucket || exit 1
BL="$T/bin/bucketlog"
export PATH="$T/bin:$PATH"
# No variable of the machine leaks in.
unset BUCKETLOG_BUCKET_URL NOETL_SHARD_INDEX NOETL_SHARD_COUNT $(env | grep -o '^NOETL_EHDB_[A-Z_]*' || true)

FAILED=()
N=0
finding() { N=$((N + 1)); CUR="$N. $*"; echo; echo "=== $CUR"; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED+=("$CUR: $*"); }
# expect DESCRIPTION COMMAND...: PASS when the command (a test) succeeds.
expect() {
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
# holds DESCRIPTION 'SHELL CONDITION': PASS when the condition (eval'd) holds.
holds() {
  local what=$1
  shift
  if eval "$1"; then pass "$what"; else fail "$what"; fi
}
clip() { if [ "$VERBOSE" = 1 ]; then cat; else head -c "${1:-600}"; echo; fi; }

# bl ARGS...: runs bucketlog, shows the command, stdout, stderr and exit
# code; leaves them in $OUT, $ERR and $RC.
bl() {
  echo "\$ bucketlog $*"
  "$BL" "$@" >"$T/out" 2>"$T/err" </dev/null
  RC=$?
  OUT=$(cat "$T/out")
  ERR=$(cat "$T/err")
  cat "$T/err" >>"$T/all.err"
  [ -n "$OUT" ] && echo "$OUT" | clip 600
  [ -n "$ERR" ] && echo "$ERR" | sed 's/^/  stderr: /' | clip 600
  echo "  exit $RC"
}

# The S3 emulator behind a proxy: $S3URL, $S3CTL (POST $S3CTL/down, /up).
"$T/bin/fakebucket" -buckets findings,outage,metrics,hup,int,reclaim,secrets,secrets2 >"$T/fb.json" 2>"$T/fb.err" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/fb.json" ] && break; sleep 0.05; done
S3URL=$(jq -r .url "$T/fb.json")
S3CTL=$(jq -r .control "$T/fb.json")
S3ENDPOINT=$(jq -r .endpoint "$T/fb.json")
# s3 NAME: the URL of bucket NAME (one of -buckets above).
s3() { echo "${S3URL/s3:\/\/findings/s3://$1}"; }
bucket_down() { echo "(the bucket goes down)"; curl -fsS -X POST "$S3CTL/down"; }
bucket_up() { echo "(the bucket comes back)"; curl -fsS -X POST "$S3CTL/up"; }

# serve_start NAME ARGS...: starts serve in the background; $BASE is its
# address, $SPID its pid, $T/NAME.err its stderr.
serve_start() {
  local name=$1
  shift
  echo "\$ bucketlog serve --listen 127.0.0.1:0 $* &"
  "$BL" serve --listen 127.0.0.1:0 "$@" >"$T/$name.out" 2>"$T/$name.err" &
  SPID=$!
  PIDS+=($SPID)
  for _ in $(seq 200); do [ -s "$T/$name.out" ] && break; sleep 0.05; done
  BASE="http://$(jq -r .listen "$T/$name.out" 2>/dev/null | head -1)"
  echo "  $(head -1 "$T/$name.out")"
  # The listen line comes before the shard has opened: wait for /readyz.
  for _ in $(seq 400); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz")" = 200 ] && break; sleep 0.05; done
}
# serve_stop SIGNAL: signals the server and waits; $RC is its exit code.
serve_stop() {
  echo "\$ kill -$1 <serve>"
  kill "-$1" "$SPID"
  wait "$SPID"
  RC=$?
  echo "  exit $RC"
}
# req METHOD PATH [BODY]: one HTTP request to $BASE; $CODE, $BODY, $CTYPE.
req() {
  local data=()
  [ $# -ge 3 ] && data=(--data-binary "$3" -H 'Content-Type: application/json')
  CODE=$(curl -sS -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$1" "${data[@]}" "$BASE$2")
  BODY=$(cat "$T/body")
  CTYPE=$(grep -i '^content-type:' "$T/hdr" | tr -d '\r' | cut -d' ' -f2-)
  echo "\$ curl -X $1 $2${3:+ -d '$3'}  → $CODE $CTYPE $(echo "$BODY" | head -c 300)"
}
event() { printf '{"execution_id":"%s","transaction_id":"%s","payload":"%s"}' "$1" "$2" "$3"; }
metric() { curl -sS "$BASE/metrics" | grep -E "^$1" ; }

# ---------------------------------------------------------------------------
finding "the bucket down: POST /v1/events answers 201 and /readyz 200 (readiness is 'takes appends')"
D1="$T/d1"
serve_start s1 --dir "$D1" --bucket "$(s3 outage)" --tail-interval 100ms --bucket-warn-interval 1s --shutdown-ship-timeout 1s
req POST /v1/events "$(event 1 before-outage p)"
# Wait until the bucket holds it: the outage begins with sequence 1 shipped.
for _ in $(seq 400); do [ "$(curl -s "$BASE/v1/status" | jq .shards[0].shipped_through)" = 1 ] && break; sleep 0.05; done
bucket_down
ok=1
for i in 1 2 3 4; do
  req POST /v1/events "$(event 1 "down-$i" "while the bucket is down")"
  [ "$CODE" = 201 ] || ok=0
done
expect "four appends with the bucket down answer 201" [ $ok = 1 ]
req GET /readyz
expect "/readyz answers 200 with the bucket down" [ "$CODE" = 200 ]

finding "failed tail puts are logged at WARN (first failure, then one summary per --bucket-warn-interval), and /v1/status says degraded"
sleep 2.5
grep -E 'level=(WARN|INFO)' "$T/s1.err" | sed 's/^/  stderr: /' | clip 1200
req GET /v1/status
expect "one WARN line for the streak's start" [ "$(grep -c 'level=WARN msg="the bucket is failing' "$T/s1.err")" = 1 ]
expect "summary WARN lines with the count (--bucket-warn-interval 1s)" grep -qE 'level=WARN msg="the bucket is still failing" .*failures=[0-9]+' "$T/s1.err"
expect "status degraded, 4 unshipped, the error named" [ "$(echo "$BODY" | jq -r '.shards[0] | "\(.state) \(.unshipped) \(.last_bucket_error != null)"')" = "degraded 4 true" ]
expect "status carries segments_local, segments_durable and segments_remote" \
  [ "$(echo "$BODY" | jq '.shards[0] | has("segments_local") and has("segments_durable") and has("segments_remote")')" = true ]

finding "SIGTERM with the bucket still down exits 7 and logs at ERROR the unshipped sequences A..B"
serve_stop TERM
grep 'level=ERROR' "$T/s1.err" | sed 's/^/  stderr: /' | clip 600
expect "exit 7 (not_in_bucket)" [ "$RC" = 7 ]
expect "an ERROR line naming sequences 2..5" grep -q 'level=ERROR.*sequences 2\.\.5' "$T/s1.err"
bucket_up
serve_start s1b --dir "$D1" --bucket "$(s3 outage)" --tail-interval 100ms
req GET /v1/status
serve_stop TERM
expect "with the bucket back the next run ships them and SIGTERM exits 0" [ "$RC" = 0 ]

finding "an empty directory with the bucket unreachable: hydration retries for --startup-timeout, then exit 5"
bucket_down
start=$(date +%s.%N)
bl serve --listen 127.0.0.1:0 --dir "$T/empty" --bucket "$(s3 outage)" --startup-timeout 3s
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "  took ${took}s"
bucket_up
expect "exit 5 (storage)" [ "$RC" = 5 ]
expect "it retried for --startup-timeout 3s (took ${took}s: at least 3s, at most 20s)" \
  awk -v t="$took" 'BEGIN { exit !(t >= 3 && t <= 20) }'

finding "bucketlog --version and bucketlog version print the build as JSON"
bl --version
expect "--version exits 0 with module version, commit and Go version" \
  [ "$RC" = 0 -a "$(echo "$OUT" | jq -r 'has("version") and has("commit") and has("go_version")')" = true ]
bl version
expect "version exits 0 with the same JSON" [ "$RC" = 0 -a "$(echo "$OUT" | jq -r .go_version)" = "$(go env GOVERSION)" ]

finding "metrics: build_info, the bucket latency histogram, HTTP requests, tip/shipped_through/base gauges, refused appends counted"
serve_start s2 --dir "$T/d2" --bucket "$(s3 metrics)" --tail-interval 100ms
for i in 1 2 3; do req POST /v1/events "$(event 1 "m$i" p)" >/dev/null; done
bad=0
for i in 1 2 3 4 5 6; do
  req POST /v1/events '{"execution_id":"1","transaction_id":"bad","payload":"p","Payload":"q"}' >/dev/null
  [ "$CODE" = 400 ] && bad=$((bad + 1))
done
echo "  six refused appends answered 400: $bad"
sleep 0.5
curl -sS "$BASE/metrics" >"$T/metrics"
grep -E '^bucketlog_(build_info|tip|shipped_through|base)\b|^bucketlog_http_requests_total.*v1/events"|^bucketlog_eventlog_ops_total\{operation="append"|^bucketlog_bucket_request_seconds_count\{operation="put"' "$T/metrics" | sed 's/^/  /'
expect "bucketlog_build_info" grep -q '^bucketlog_build_info{' "$T/metrics"
expect "bucketlog_bucket_request_seconds histogram by operation" grep -q '^bucketlog_bucket_request_seconds_bucket{.*operation="put"' "$T/metrics"
expect "HTTP requests by route and status (the six 400s)" grep -qE '^bucketlog_http_requests_total\{code="4xx",method="POST",route="/v1/events"\} 6$' "$T/metrics"
expect "gauge tip = 3" grep -qE '^bucketlog_tip\{.*\} 3$' "$T/metrics"
expect "gauge shipped_through = 3" grep -qE '^bucketlog_shipped_through\{.*\} 3$' "$T/metrics"
expect "gauge base = 1" grep -qE '^bucketlog_base\{.*\} 1$' "$T/metrics"
expect "six 400s counted as append/invalid_input" grep -qE '^bucketlog_eventlog_ops_total\{operation="append",outcome="invalid_input",shard="0"\} 6$' "$T/metrics"

finding "router's own 404/405 answer JSON"
req GET /nope
expect "404 application/json with class" [ "$CODE" = 404 -a "$CTYPE" = application/json -a "$(echo "$BODY" | jq -r .class)" = usage ]
req PUT /v1/events
expect "405 application/json with class" [ "$CODE" = 405 -a "$CTYPE" = application/json -a "$(echo "$BODY" | jq -r .class)" = usage ]

finding "a JSON object as payload, and duplicate or differently-cased keys, are refused with our message"
req POST /v1/events '{"execution_id":"1","transaction_id":"o","payload":{"a":1}}'
holds "object payload: 400 invalid_input, no Go decoder message" \
  '[ "$CODE" = 400 -a "$(echo "$BODY" | jq -r .class)" = invalid_input ] && ! echo "$BODY" | grep -q "json: cannot unmarshal\|Go struct\|Go value"'
req POST /v1/events '{"execution_id":"1","transaction_id":"d","payload":"a","payload":"b"}'
expect "duplicate key: 400 invalid_input" [ "$CODE" = 400 -a "$(echo "$BODY" | jq -r .class)" = invalid_input ]
req POST /v1/events '{"execution_id":"1","transaction_id":"c","payload":"a","Payload":"b"}'
expect "differently-cased key: 400 invalid_input" [ "$CODE" = 400 -a "$(echo "$BODY" | jq -r .class)" = invalid_input ]
req GET '/v1/events?limit=0'
expect "nothing of the refused ones was written (tip 3)" [ "$(echo "$BODY" | jq -r .record_count)" = 3 ]
serve_stop TERM

finding "SIGHUP and SIGINT behave as SIGTERM (final shipment, exit 0 with the bucket up)"
for sig in HUP INT; do
  b=$(s3 "$(echo $sig | tr A-Z a-z)")
  serve_start "s3$sig" --dir "$T/d3$sig" --bucket "$b" --tail-interval 1h --shutdown-ship-timeout 5s
  req POST /v1/events "$(event 1 "h-$sig" p)"
  serve_stop "$sig"
  expect "SIG$sig: exit 0" [ "$RC" = 0 ]
  bl restore --dir "$T/r3$sig" --bucket "$b"
  expect "SIG$sig: the final shipment put the event in the bucket (restore's last_sequence 1)" [ "$(echo "$OUT" | jq -r .last_sequence)" = 1 ]
done

finding "intervals have sane minimums: --tail-interval 1ns is refused"
bl serve --listen 127.0.0.1:0 --dir "$T/d4" --tail-interval 1ns
holds "exit 2 (usage) naming the minimum" '[ "$RC" = 2 ] && echo "$ERR" | grep -q minimum'
bl serve --listen 127.0.0.1:0 --dir "$T/d4" --bucket "$(s3 findings)" --bucket-warn-interval 1ms
expect "--bucket-warn-interval 1ms: exit 2 (usage)" [ "$RC" = 2 ]

finding "--help=false does not print help; --log-level and --log-format"
bl scan --dir "$T" --help=false --limit 0
holds "scan --help=false runs the scan" '[ "$RC" = 0 ] && echo "$OUT" | jq -e ".action == \"eventlog-scan\"" >/dev/null'
serve_start s5 --dir "$T/d5s" --log-level debug --log-format json
serve_stop TERM
head -2 "$T/s5.err" | sed 's/^/  stderr: /' | clip 400
expect "--log-format json: every stderr line of serve is a JSON object with a level" \
  jq -se 'length > 0 and all(.[]; has("level") and has("msg"))' "$T/s5.err" >/dev/null
serve_start s5w --dir "$T/d5s" --log-level warn
serve_stop TERM
expect "--log-level warn: serve's INFO lines (serving, stopping) are not printed" [ "$(grep -c 'level=INFO' "$T/s5w.err")" = 0 ]
bl append --dir "$T/d5" --execution-id 1 --transaction-id t2 --payload p --log-level loud
expect "--log-level loud: exit 2 (usage)" [ "$RC" = 2 ]

finding "errors print one prefix, never 'bucketlog: bucketlog:'; scan --dir /nonexistent is a usage error"
bl scan --limit x
holds "no doubled prefix" '[ "$RC" = 2 ] && ! echo "$ERR" | grep -q "bucketlog: bucketlog:"'
bl append --dir "$T/d5" --execution-id "" --transaction-id t --payload p
holds "no doubled prefix (invalid input)" '[ "$RC" -ne 0 ] && ! echo "$ERR" | grep -q "bucketlog: bucketlog:"'
bl scan --dir /nonexistent
expect "scan --dir /nonexistent: exit 2, not exists:false" [ "$RC" = 2 ]

finding "append --file - reads stdin"
echo "\$ printf '<two events>' | bucketlog append --dir $T/d6 --file -"
printf '%s\n%s\n' "$(event 1 s1 a)" "$(event 1 s2 b)" | "$BL" append --dir "$T/d6" --file - >"$T/out" 2>"$T/err"
RC=$?
cat "$T/out"
expect "appended 2 from stdin" [ "$RC" = 0 -a "$(jq -r .appended "$T/out")" = 2 ]
echo "\$ printf '<a cased duplicate>' | bucketlog append --dir $T/d6 --file -"
printf '%s\n' '{"execution_id":"1","transaction_id":"s3","payload":"a","PAYLOAD":"b"}' | "$BL" append --dir "$T/d6" --file - >"$T/out" 2>"$T/err"
RC=$?
cat "$T/out"
expect "a differently-cased key in a file: exit 4 (invalid_input)" [ "$RC" = 4 ]

# A file:// bucket with two shards (0 and 3 of 4) for the bucket commands.
FB="$T/filebucket"
mkdir -p "$FB"
FBURL="file://$FB"
finding "verify without --shards discovers the shards; verify --shards 0,5 with 5 absent is not ok"
owned() { # owned SHARD COUNT N: N execution ids shard SHARD of COUNT owns
  local s=$1 c=$2 n=$3 i=0 found=0
  while [ $found -lt "$n" ]; do
    i=$((i + 1))
    if "$BL" append --dir "$T/probe" --shard-index "$s" --shard-count "$c" --execution-id "e$i" --transaction-id "p$i" --payload p >/dev/null 2>&1; then
      echo "e$i"
      found=$((found + 1))
    fi
  done
  rm -rf "$T/probe"
}
for shard in 0 3; do
  for id in $(owned $shard 4 3); do
    "$BL" append --dir "$T/src" --bucket "$FBURL" --shard-index $shard --shard-count 4 --execution-id "$id" --transaction-id "$id" --payload p >/dev/null 2>&1
  done
  NOETL_SHARD_INDEX=$shard NOETL_SHARD_COUNT=4 "$BL" ship --dir "$T/src" --bucket "$FBURL" --seal-active >/dev/null 2>&1
done
bl verify --bucket "$FBURL"
expect "verify finds shards [0,3] and checks both" [ "$RC" = 0 -a "$(echo "$OUT" | jq -c .shards_found)" = "[0,3]" -a "$(echo "$OUT" | jq '.shards | length')" = 2 ]
bl verify --bucket "$FBURL" --shards 0,5
expect "verify --shards 0,5: not ok, non-zero exit" [ "$RC" != 0 -a "$(echo "$OUT" | jq -r .ok)" = false ]

bl restore --bucket "$FBURL" --dir "$T/all" --all-shards
holds "restore --all-shards finds and restores shards 0 and 3" '[ "$RC" = 0 -a "$(echo "$OUT" | jq -c .shards_found)" = "[0,3]" -a "$(echo "$OUT" | jq ".restored | length")" = 2 ]'

finding "an init container's 'restore if there is no local store yet'; a Dockerfile and a Kubernetes example"
bl restore --bucket "$FBURL" --dir "$T/all" --shard 3 --if-not-exists
holds "restore --if-not-exists over a store: exit 0, skipped" '[ "$RC" = 0 -a "$(echo "$OUT" | jq -r .skipped)" = true ]'
bl restore --bucket "$FBURL" --dir "$T/init" --shard 3 --if-not-exists
holds "restore --if-not-exists into an empty directory restores (last_sequence 3)" '[ "$RC" = 0 -a "$(echo "$OUT" | jq -r .last_sequence)" = 3 ]'
echo "\$ ls deploy deploy/kubernetes"
ls deploy deploy/kubernetes | sed 's/^/  /' | tr '\n' ' '
echo
holds "deploy/Dockerfile and the StatefulSet, Service and PodDisruptionBudget exist (their test: cd deploy && go test ./..., run by .ci/run)" \
  '[ -f deploy/Dockerfile -a -f deploy/kubernetes/statefulset.yaml -a -f deploy/kubernetes/service.yaml -a -f deploy/kubernetes/poddisruptionbudget.yaml ]'

finding "no list field is null: append, ship, verify, restore, inspect, scan, gc"
nulls=0
for cmd in "append --dir $T/n --bucket $FBURL --execution-id 1 --transaction-id n --payload p" \
  "ship --dir $T/n --bucket $FBURL --seal-active" "verify --bucket $FBURL --shards 0" \
  "restore --dir $T/nr --bucket $FBURL" "inspect --dir $T/n" "scan --dir $T/n --limit 0" \
  "gc --dir $T/n --bucket $FBURL" "consumers --dir $T/n"; do
  # shellcheck disable=SC2086
  bl $cmd >/dev/null
  if echo "$OUT" | sed -e 's/"checkpoint":null//g' -e 's/"reclaim_manifest":null//g' | grep -q null; then
    echo "  null in: bucketlog $cmd: $OUT" | head -c 400
    nulls=$((nulls + 1))
  fi
done
expect "no null in any output" [ $nulls = 0 ]

finding "one meaning of base (restore, verify, scan, inspect) after a reclaim; restore's progress line agrees with its JSON"
GD="$T/g"
GB=$(s3 reclaim)
for i in $(seq 1 60); do echo "$(event 1 "g$i" "$(printf 'x%.0s' $(seq 40))")"; done >"$T/g.jsonl"
"$BL" append --dir "$GD" --bucket "$GB" --segment-max-bytes 1024 --file "$T/g.jsonl" >/dev/null 2>&1
"$BL" tail --dir "$GD" --consumer c --limit 30 >/dev/null 2>&1
"$BL" ack --dir "$GD" --consumer c --sequence 30 >/dev/null 2>&1
"$BL" ship --dir "$GD" --bucket "$GB" --seal-active >/dev/null 2>&1
bl gc --dir "$GD" --bucket "$GB" --min-retained-segments 1
expect "gc reclaimed" [ "$(echo "$OUT" | jq -r .outcome)" = reclaimed ]
b_scan=$("$BL" scan --dir "$GD" --limit 0 2>/dev/null | jq -r .base)
b_inspect=$("$BL" inspect --dir "$GD" 2>/dev/null | jq -r .base)
bl verify --bucket "$GB" --shards 0
b_verify=$(echo "$OUT" | jq -r '.shards[0].base')
bl restore --dir "$T/gr" --bucket "$GB"
b_restore=$(echo "$OUT" | jq -r .base)
echo "  base: scan $b_scan, inspect $b_inspect, verify $b_verify, restore $b_restore"
expect "the same base everywhere (> 1)" [ "$b_scan" = "$b_inspect" -a "$b_scan" = "$b_verify" -a "$b_scan" = "$b_restore" -a "$b_scan" -gt 1 ]
line=$(echo "$ERR" | grep 'done:' | grep -o '[0-9]*/[0-9]* objects')
expect "restore's done line ($line) counts the JSON's $(echo "$OUT" | jq .objects) objects" \
  [ "${line%%/*}" = "$(echo "$OUT" | jq .objects)" -a "$(echo "$line" | cut -d/ -f2 | cut -d' ' -f1)" = "$(echo "$OUT" | jq .objects)" ]

finding "secrets in the bucket URL never printed: inspect, selfcheck config, bucket.json, serve logs"
HOST=${S3ENDPOINT#http://}
GOOD="s3://secrets?endpoint=http://opuser:PASSWORDpw1@$HOST&use_path_style=true&region=us-east-1&anonymous=true"
TOK="s3://secrets?region=us-east-1&endpoint=http%3A%2F%2F$HOST%2F%3Ftoken%3DTOKENtk3&use_path_style=true&anonymous=true;token=TOKENtk2"
leaks() { grep -l -E 'PASSWORDpw1|TOKENtk2|TOKENtk3' "$@" 2>/dev/null; }
SD="$T/sec"
bl append --dir "$SD" --bucket "$GOOD" --execution-id 1 --transaction-id t --payload p
cp "$T/out" "$T/leak.append.out"; cp "$T/err" "$T/leak.append.err"
echo "  bucket.json: $(cat "$SD/shard-0000/bucket.json" | head -c 300)"
bl inspect --dir "$SD"
cp "$T/out" "$T/leak.inspect.out"; cp "$T/err" "$T/leak.inspect.err"
for u in "$GOOD" "$TOK"; do
  bl selfcheck config --bucket "$u"
  cat "$T/out" "$T/err" >>"$T/leak.selfcheck"
done
serve_start sec --dir "$T/sec2" --bucket "${GOOD/secrets?/secrets2?}" --log-level debug
serve_stop TERM
serve_start secre --dir "$SD" --bucket "$GOOD" --log-level debug
serve_stop TERM
expect "serve reopens a store whose bucket URL has userinfo in endpoint= (exit 0)" [ "$RC" = 0 ]
grep -h 'bucket' "$T/sec.err" "$T/secre.err" | sed 's/^/  stderr: /' | head -5
bl serve --listen 127.0.0.1:0 --dir "$T/sec3" --bucket "s3://secrets?region=us-east-1;token=TOKENtk2&endpoint=http://opuser:PASSWORDpw1@127.0.0.1:1&use_path_style=true&anonymous=true" --startup-timeout 1s
cp "$T/out" "$T/leak.down.out"; cp "$T/err" "$T/leak.down.err"
found=$(leaks "$T"/leak.* "$SD/shard-0000/bucket.json" "$T/sec.err" "$T/sec.out" "$T/secre.err")
expect "no password or token in any of them${found:+ (leaks in: $found)}" [ -z "$found" ]
expect "the URL is shown redacted" grep -q REDACTED "$T/leak.inspect.out"

finding "no error of this run printed a doubled 'bucketlog: bucketlog:'"
grep -c . "$T/all.err" | sed 's/^/  stderr lines of the one-shot commands: /'
grep -h 'bucketlog: bucketlog:' "$T"/*.err | sed 's/^/  /' | clip 600
holds "none doubled" '! grep -q "bucketlog: bucketlog:" "$T"/*.err'

# ---------------------------------------------------------------------------
echo
if [ ${#FAILED[@]} -eq 0 ]; then
  echo "all $N findings hold"
  exit 0
fi
echo "${#FAILED[@]} check(s) regressed:"
printf '  %s\n' "${FAILED[@]}"
exit 1
