# syntax=docker/dockerfile:1
#
# nova-gateway image.
#   docker build -t nova-gateway:0.1.0 .
#   docker run --rm -p 8080:8080 -p 9464:9464 --read-only --tmpfs /tmp nova-gateway:0.1.0
#
# Runs as the unprivileged `node` user (UID/GID 1000), writes nothing to its filesystem (fine with
# a read-only root; /tmp may be an emptyDir/tmpfs), and runs `node` as PID 1 in exec form so SIGTERM
# reaches the gateway, which drains in-flight requests and streams and exits 0. No HEALTHCHECK:
# Kubernetes probes /livez and /readyz. For reproducible builds pin the base by digest:
#   docker build --build-arg NODE_IMAGE=node:22-bookworm-slim@sha256:<digest> .
ARG NODE_IMAGE=node:22-bookworm-slim

# ---- build: all dependencies, TypeScript -> dist/, the console -> dist/console ------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the build needs no install script (and the slim image has no compiler for optional native add-ons).
# Optional packages stay: Vite's bundler and CSS minifier (rolldown, lightningcss) ship their native code
# as platform packages. This stage is thrown away, so the larger install never reaches the image.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build-if-stale.mjs ./scripts/
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies + dist + default config ------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    METRICS_PORT=9464
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no production dependency needs an install script.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && rm -rf /root/.npm /tmp/*
COPY --from=build /app/dist ./dist
COPY config ./config
# Files stay owned by root and read-only for the runtime user.
USER 1000:1000
EXPOSE 8080 9464
# The Node flags of `npm start` (package.json), which a test keeps equal: see docs/operations.md, "Node flags and process memory".
CMD ["node", "--no-memory-reducer", "dist/src/server.js"]
