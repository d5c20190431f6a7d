# syntax=docker/dockerfile:1
# keyroll container image: `docker build -t keyroll:0.1.0 .` (docs/kubernetes.md).
# Two stages, so the runtime image holds only the bundled CLI and the example configs: no
# TypeScript, no node_modules, no dev tools, no npm.
# test/packaging/dockerfile.test.ts checks this file statically (there is no Docker engine in CI);
# test/packaging/bundle.test.ts proves the bundle runs with no node_modules anywhere near it.

# The base image of both stages. Pin it by digest for a release build, so the image is built from
# exactly the bytes that were reviewed and scanned, whatever the tag points at later:
#   docker build --build-arg NODE_IMAGE=node:24-bookworm-slim@sha256:<digest> -t keyroll:0.1.0 .
# (`docker buildx imagetools inspect node:24-bookworm-slim` prints the digest; Renovate's
# docker digest pinning keeps it current). The default below is the tag, unpinned, for local
# builds only: no digest is written here that was not read from the registry.
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: bundle src/ and its dependencies into dist/ with the dev toolchain (esbuild).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: esbuild's binary comes as an optional dependency; no install script needs to run.
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
# tsconfig.json: esbuild follows its class-field and module settings, as tsc and the tests do.
COPY tsconfig.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
# --without-emulator: the image carries no API emulator, whose fault-injection routes are
# unauthenticated; `keyroll emulator` and `keyroll demo` say they are not in this build.
RUN npm run build -- --without-emulator
# Node's compile cache for the bundle, shipped in the image: a pod starts with an empty /tmp, so
# a cache made at run time never helps, and compiling the chunks cost each cold start ~60 ms.
# Node keys the cache by version, V8 flags, user id and path: it is made here with the same node,
# the ENTRYPOINT's flags, the runtime's user (10001) and the runtime's paths (/app/dist), and
# made readable by all, as the runtime copy is root-owned and read-only (test/packaging checks
# that these flags and the ENTRYPOINT's are the same).
COPY scripts/warm-compile-cache.js ./scripts/
RUN mkdir /compile-cache && chown 10001:10001 /compile-cache
USER 10001:10001
RUN NODE_COMPILE_CACHE=/compile-cache node --max-semi-space-size=2 --max-old-space-size=256 scripts/warm-compile-cache.js /app/dist/cli \
 && chmod -R a+rX,go-w /compile-cache

# ---- runtime: the bundle (every dependency is inside it), run as a numeric non-root user.
FROM ${NODE_IMAGE} AS runtime
# MALLOC_ARENA_MAX=2: glibc gives each thread that allocates (V8's helper threads, libuv's
# pool) an arena of its own and keeps what it freed there; two arenas cut the peak RSS of a
# 1,000-key rotation by about 5 MB at no measurable CPU cost (docs/benchmarks.md).
ENV NODE_ENV=production \
    HOME=/tmp \
    TMPDIR=/tmp \
    MALLOC_ARENA_MAX=2 \
    NODE_COMPILE_CACHE=/app/compile-cache
WORKDIR /app
# npm, npx, corepack and yarn are removed: the runtime never calls them (node runs the CLI
# directly, because npm does not forward SIGTERM), so they are only attack surface.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg /tmp/* /root/.npm
COPY package.json ./
COPY --from=build /app/dist ./dist
COPY --from=build /compile-cache ./compile-cache
COPY config ./config
# Everything under /app stays owned by root and read-only to keyroll: the process cannot
# change its own code. keyroll writes only to /tmp (an emptyDir in the chart) and to mounted
# directories (file backend, escrow), so it runs with a read-only root filesystem.
# 10001 is outside the range of the image's own users (node is 1000); the chart sets the same.
USER 10001:10001
# keyroll handles SIGTERM itself (finishes in-flight stores, starts no new rotation), also as PID 1.
STOPSIGNAL SIGTERM
# V8 sizes its heap from the node's memory, not from what keyroll keeps: on a large node the
# young generation grows to 64 MB and garbage piles up in the old one, while keyroll's live heap
# stays near 25 MB. --max-semi-space-size=2 keeps the young generation at 4 MB, and
# --max-old-space-size=256 bounds the old one at twice what the largest policy keyroll accepts
# (1 MiB, ~13,700 keys) needs to be planned (between 96 and 128 MB): the peak RSS of a 1,000-key
# rotation falls from 176 to about 120 MB at no measurable cost (docs/benchmarks.md).
# Only options Node documents and accepts in NODE_OPTIONS: no V8 tuning flags, whose meaning a
# Node upgrade may change (test/packaging/dockerfile.test.ts checks).
# No --enable-source-maps: it parses the bundle's source maps at every start (+120 ms of CPU before
# the first roll); set NODE_OPTIONS=--enable-source-maps when a stack trace needs TypeScript lines.
ENTRYPOINT ["node", "--max-semi-space-size=2", "--max-old-space-size=256", "/app/dist/cli/entry.js"]
CMD ["run", "--policy", "/etc/keyroll/policy.yaml"]
