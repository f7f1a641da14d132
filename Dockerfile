# qlessd: multi-stage build. The Lua script is compiled into the binary, so the builder
# needs lua/ as well as src/. The runtime image carries Valkey 8.1 (Debian 13's
# valkey-server, a Redis-compatible server under the BSD licence) as the embedded server,
# so that `docker run` with no configuration gets the embedded default: it holds a
# waiting job in about a quarter less memory than Redis 7.0 (docs/performance.md).
# docker-compose.yml instead points qlessd at a separate Redis container.
#
#   docker build -t qlessd .
#   docker run -p 127.0.0.1:5858:5858 -e QLESSD_ALLOW_UNAUTHENTICATED=true \
#     -v qlessd-data:/var/lib/qlessd qlessd
#
# (README.md, "Deployment": the data volume and its owner, running with an auth file.)

# Any Rust at or above Cargo.toml's rust-version builds it.
FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY lua ./lua
# Declared in Cargo.toml, so cargo wants them present even though it does not build them.
COPY benches ./benches
COPY tests ./tests
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked && cp target/release/qlessd /usr/local/bin/qlessd

# (The binary, linked against Debian 12's glibc, runs on Debian 13's newer one.)
FROM debian:trixie-slim
# tini runs as PID 1: it reaps orphaned processes (PID 1 must, and qlessd is not an init)
# and passes docker stop's SIGTERM on to qlessd, which then stops its Redis cleanly.
# The qlessd user (uid 10001) owns its home, /var/lib/qlessd, which is the data volume:
# a named volume is created from the image with that owner; a host directory mounted
# there must be chowned to 10001 first. Package versions are Debian 13's, unpinned so
# that a rebuild picks up security updates.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends valkey-server tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 qlessd \
 && useradd --system --uid 10001 --gid qlessd --create-home --home-dir /var/lib/qlessd qlessd \
 && install -d -o qlessd -g qlessd -m 700 /var/lib/qlessd/data
COPY --from=builder /usr/local/bin/qlessd /usr/local/bin/qlessd
# Numeric, so that a runtime enforcing non-root (runAsNonRoot) can check it.
USER 10001:10001
WORKDIR /var/lib/qlessd
# Inside the container qlessd listens on every address, so it needs an auth file
# (QLESSD_AUTH_FILE) or QLESSD_ALLOW_UNAUTHENTICATED=true to start; neither is set here,
# so that an image run without thought is not an open queue.
ENV QLESSD_LISTEN=0.0.0.0:5858 \
    QLESSD_DATA_DIR=/var/lib/qlessd/data \
    QLESSD_REDIS_SERVER=valkey-server
VOLUME ["/var/lib/qlessd"]
EXPOSE 5858
# No curl in the image: the binary checks /readyz itself (QLESSD_LISTEN says where).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/qlessd", "healthcheck", "--timeout", "4"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/qlessd"]
