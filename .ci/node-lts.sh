#!/usr/bin/env bash
# The image runs Node 22 (Dockerfile, package.json engines) while this machine's tests run on Node 20.
# This runs the real-process suites with the server on Node 22, fetched as the `node` npm package
# (no system install), and the built server (`node dist/src/server.js`) through a start and a SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LTS=${NODE_LTS:-22}

node_bin=$(npx --yes --package "node@${NODE_LTS}" -- node -p 'process.execPath')
echo "server on $("$node_bin" --version) ($node_bin); test runner on $(node --version)"

# --reporter=default: the main suite's test-results.json (the CI summary) is not overwritten.
NOVA_GATEWAY_NODE=$node_bin npx --no-install vitest run --reporter=default \
  test/e2e/operational-logs.test.ts test/e2e/graceful-drain.test.ts test/e2e/openai-sdk.test.ts

npm run build >/dev/null
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
PORT=$port HOST=127.0.0.1 METRICS_PORT=0 REDIS_URL= "$node_bin" dist/src/server.js >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if curl -fs "http://127.0.0.1:$port/readyz" >/dev/null; then break; fi
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/readyz"
echo
kill -TERM "$pid"
wait "$pid"
grep -q '"msg":"stopped"' "$log"
echo "built server on Node ${NODE_LTS}: ready, then stopped cleanly on SIGTERM"
