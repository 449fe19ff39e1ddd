# netconnectd, for running beside ovn-central.
#
#   docker build -t netconnectd .
#   docker run -v /path/to/manifests:/etc/netconnect/manifests:ro \
#       -v netconnect-status:/var/lib/netconnect -p 9476:9476 \
#       -e NETCONNECTD_NB=tcp:192.0.2.10:6641 netconnectd
#
# Every flag can be given as NETCONNECTD_<FLAG>, or after the image name.
#
# RUST_IMAGE and BASE name the build stage's and the final stage's base images. Where
# nothing can be pulled, the test suite builds both from Debian's packages
# (ovn-sandbox's rust_image and base_image: Debian sid with its cargo, and the sid root
# filesystem) and passes their tags; the steps below are the same either way.
ARG RUST_IMAGE=rust:1-slim-trixie
ARG BASE=debian:trixie-slim

FROM ${RUST_IMAGE} AS build
# Marks the build stage's image (ovn-sandbox removes it once a test build is done).
LABEL org.ovsdb-rs.stage=build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p netconnect --bin netconnectd \
    && install -D target/release/netconnectd /out/netconnectd

FROM ${BASE}
LABEL org.opencontainers.image.title="netconnectd" \
      org.opencontainers.image.description="Programs OVN_Northbound with OVN-Kubernetes user-defined networks and ClusterNetworkConnects"
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 netconnect \
    && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/netconnect --shell /usr/sbin/nologin netconnect \
    && mkdir -p /etc/netconnect/manifests /var/lib/netconnect \
    && chown netconnect:netconnect /var/lib/netconnect
COPY --from=build /out/netconnectd /usr/bin/netconnectd
ENV NETCONNECTD_MANIFESTS=/etc/netconnect/manifests \
    NETCONNECTD_STATUS_DIR=/var/lib/netconnect \
    NETCONNECTD_LISTEN=0.0.0.0:9476
USER 65532:65532
WORKDIR /var/lib/netconnect
VOLUME ["/var/lib/netconnect"]
EXPOSE 9476
ENTRYPOINT ["/usr/bin/netconnectd"]
