# syntax=docker/dockerfile:1
#
# The transcriber image: one binary that runs any role ("up", "worker",
# "bot", "api", "transcribe", "jobs") with ffmpeg and the offline
# pocketsphinx engine beside it.
#
#   docker build -t transcriber:local .
#   docker run --rm -p 127.0.0.1:8080:8080 -p 127.0.0.1:8233:8233 transcriber:local up
#
# docker-compose.yml builds it for the worker, bot and api services.

# Go version of go.mod; the build stage uses Debian 12 like the runtime, so
# nothing in the toolchain's view of the system differs from where it runs.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, on their own layer and in a BuildKit cache, so a code
# change downloads nothing. The build cache mount keeps compiled packages
# across builds: the Temporal server inside the binary takes minutes to
# compile cold and seconds afterwards.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# CGO is off: the embedded server's SQLite is pure Go, and a static binary
# does not care which libc the runtime stage has.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/transcriber ./cmd/transcriber

# Debian 12 (bookworm): its pocketsphinx packages are the ones the local
# engine is written and tested against.
FROM debian:12.12-slim AS runtime
# ca-certificates for the HTTPS engines, Telegram and S3; curl for the
# health check; ffmpeg and pocketsphinx for converting and recognising.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates curl ffmpeg pocketsphinx pocketsphinx-en-us \
    && rm -rf /var/lib/apt/lists/*
# A fixed numeric id, so that orchestrators that insist on non-root
# (runAsNonRoot) can verify it and volumes can be prepared for it.
RUN groupadd --system --gid 10001 transcriber \
    && useradd --system --uid 10001 --gid transcriber --no-create-home \
        --home-dir /var/lib/transcriber --shell /usr/sbin/nologin transcriber \
    && install -d -o transcriber -g transcriber -m 0750 /var/lib/transcriber
COPY --from=build /out/transcriber /usr/local/bin/transcriber

# Inside a container the HTTP server (health, metrics, API) and the
# embedded Web UI of "up" must listen beyond loopback to be reachable
# through published ports; publish them on the host's loopback unless
# they should be public.
ENV TRANSCRIBER_HTTP_ADDR=0.0.0.0:8080 \
    TRANSCRIBER_UI_ADDR=0.0.0.0:8233 \
    TRANSCRIBER_DATA_DIR=/var/lib/transcriber
USER 10001:10001
WORKDIR /var/lib/transcriber
EXPOSE 8080 8233

# Liveness of the HTTP server on whatever port TRANSCRIBER_HTTP_ADDR names.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS -o /dev/null "http://127.0.0.1:${TRANSCRIBER_HTTP_ADDR##*:}/healthz" || exit 1

ENTRYPOINT ["transcriber"]
CMD ["up"]
