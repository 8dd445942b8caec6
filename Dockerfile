# volley's image for `volley k8s`: built in a full Rust image, run from a
# small Debian one as an unprivileged user (uid 10001, as the Job's
# securityContext asks).
#   docker build -t volley:latest .
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY schema ./schema
# Cargo.toml names the integration test target; cargo wants its file present.
COPY tests ./tests
RUN cargo build --release --locked --bin volley

FROM debian:bookworm-slim
# CA roots for https targets; nothing else is needed at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin volley
COPY --from=build /src/target/release/volley /usr/local/bin/volley
USER 10001:10001
ENTRYPOINT ["volley"]
