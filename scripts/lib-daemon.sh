# Shell helpers for tests that drive a `flightdeck serve` through the CLI. Source it
# after setting `fd` (the binary), `work` (a scratch directory) and
# FLIGHTDECK_STATE_DIR (the daemon's state directory).

server=
# start_serve ARGS...: starts serve in the background (log in $work/serve.log) and
# waits for its API address.
start_serve() {
  rm -f "$FLIGHTDECK_STATE_DIR/api.url"
  "$fd" serve --listen 127.0.0.1:0 "$@" >> "$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do
    [ -s "$FLIGHTDECK_STATE_DIR/api.url" ] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  fail "serve did not start"
}

# stop_serve: SIGTERM, and serve must exit 0 within 30 s.
stop_serve() {
  kill -TERM "$server"
  for _ in $(seq 1 300); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$server" 2>/dev/null; then fail "serve still runs 30 s after SIGTERM"; fi
  wait "$server" || fail "serve exited non-zero after SIGTERM"
  server=
}

# The serve log first and the failure last, so that the end of a log (all CI shows of a
# background job) names what failed.
fail() { echo "--- serve log"; tail -50 "$work/serve.log" || true; echo "FAIL: $*"; exit 1; }

# wait_for SECONDS CMD...: until CMD succeeds.
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $end ] && return 1
    sleep 1
  done
}

# phase_is NAME PHASE: the daemon shows the cluster in that phase (Ready means ready),
# from a reconcile of its latest spec (observedGeneration = generation).
phase_is() {
  "$fd" get cluster "$1" -o json | python3 -c "
import json,sys; d=json.load(sys.stdin)
ok=d['phase']=='$2' and d['ready']==('$2'=='Ready') and d['observedGeneration']==d['generation']
sys.exit(0 if ok else 1)"
}

# up_to_date NAME [IMAGE]: from a reconcile of its latest spec, Ready, every machine of
# every set up to date (and, with IMAGE, every control-plane machine on that image).
up_to_date() {
  "$fd" get cluster "$1" -o json | python3 -c "
import json,sys; d=json.load(sys.stdin); st=d['status']
ok=d['observedGeneration']==d['generation'] and d['ready']
ok=ok and d['controlPlane']['upToDate']==d['controlPlane']['desired'] and all(p['upToDate']==p['desired'] for p in d['pools'])
image='${2:-}'
ok=ok and (not image or all(m['image']==image for m in st['controlPlane']['machines']))
sys.exit(0 if ok else 1)"
}

url() { cat "$FLIGHTDECK_STATE_DIR/api.url"; }
admin() { cat "$FLIGHTDECK_STATE_DIR/admin.token"; }
api() { curl -sf -H "Authorization: Bearer $(admin)" "$(url)$1"; }
