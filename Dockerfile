# syntax=docker/dockerfile:1

# Build stage: the release binary, with the versions pinned in Cargo.lock.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked

# Runtime stage: the binary alone on a slim Debian, as an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin prioq
COPY --from=builder /src/target/release/prioq /usr/local/bin/prioq
USER prioq
ENV PRIOQ_LISTEN=0.0.0.0:8080
EXPOSE 8080
# prioq drains in-flight requests on SIGTERM and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/prioq"]
