# A Rust toolchain image from Debian's packages (cargo, rustc and a C compiler for the
# crates that build C), for a Dockerfile's build stage where the `rust` image cannot be
# pulled: ovn-sandbox builds it on its sid base (BASE) and passes its tag as the
# netconnectd Dockerfile's RUST_IMAGE. Cargo trusts the certificate authorities of the
# machine that builds it (host-ca-certificates.crt, put in the build context).
ARG BASE=debian:sid
FROM ${BASE}
RUN apt-get -o Acquire::Check-Valid-Until=false update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        cargo rustc gcc libc6-dev ca-certificates \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
COPY host-ca-certificates.crt /etc/ssl/certs/host-ca-certificates.crt
ENV CARGO_HTTP_CAINFO=/etc/ssl/certs/host-ca-certificates.crt
