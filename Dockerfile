# qlessd: multi-stage build. The Lua script is compiled into the binary, so the builder
# needs lua/ as well as src/. The runtime image carries redis-server too, so that
# `docker run` with no configuration gets the embedded default; docker-compose.yml
# instead points qlessd at a separate Redis container.

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

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/qlessd qlessd
COPY --from=builder /usr/local/bin/qlessd /usr/local/bin/qlessd
USER qlessd
WORKDIR /var/lib/qlessd
ENV QLESSD_LISTEN=0.0.0.0:5858 \
    QLESSD_DATA_DIR=/var/lib/qlessd/data
VOLUME ["/var/lib/qlessd"]
EXPOSE 5858
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/qlessd"]
