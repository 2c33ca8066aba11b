# One image for kube-retention's binaries: the webhook, its certificate sidecar and the
# controller. Build: docker build -t ghcr.io/kube-retention/kube-retention:latest . (without
# Docker: `make image` writes the same binaries, static, as an OCI archive)
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
      --package kube-retention-webhook --package kube-retention-certs --package kube-retention-controller \
 && mkdir /out \
 && cp target/release/kube-retention-webhook target/release/kube-retention-certs \
       target/release/kube-retention-controller /out/

# glibc and CA certificates, no shell, runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/kube-retention-webhook"]
