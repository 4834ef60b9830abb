#!/usr/bin/env bash
# The Node the product runs on (package.json engines, the Dockerfile's image): NODE_LTS (22) or newer.
#
#   bash .ci/node-lts.sh bin-dir   prints the directory of such a `node`: the PATH's when it is new
#                                  enough, else Node ${NODE_LTS} fetched as the `node` npm package
#                                  (npx: no system install). .ci/run puts it first on the PATH, so that
#                                  npm ci, the checks and the whole test suite run on it.
#   bash .ci/node-lts.sh           the built server (`npm run build`, then `node dist/src/server.js`, as
#                                  the image runs it) on that Node: ready, then a clean stop on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_LTS=${NODE_LTS:-22}

bin_dir() {
  local major bin
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "${major}" -ge "${NODE_LTS}" ]; then
    bin=$(node -p 'process.execPath')
  else
    bin=$(npx --yes --package "node@${NODE_LTS}" -- node -p 'process.execPath')
  fi
  "${bin}" --version >/dev/null
  dirname "${bin}"
}

if [ "${1:-}" = bin-dir ]; then
  bin_dir
  exit 0
fi

node_bin="$(bin_dir)/node"
echo "built server on $("$node_bin" --version) ($node_bin)"
PATH="$(dirname "$node_bin"):$PATH" npm run build >/dev/null
port=$("$node_bin" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
log=$(mktemp)
pid=
# On a failure: the server's log, and no server left running.
trap 'status=$?; if [ "$status" -ne 0 ]; then cat "$log"; [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null; fi; rm -f "$log"' EXIT
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
echo "built server on $("$node_bin" --version): ready, then stopped cleanly on SIGTERM"
