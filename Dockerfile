# A container build for those with Docker or Podman, not the released image: it builds glibc
# binaries (webhook, certificate sidecar, controller; no kubectl-retention) on distroless/cc
# with the webhook as entrypoint. The image the chart runs is `make release`'s (`make image` for
# amd64 alone): static musl binaries on an empty base, for linux/amd64 and linux/arm64, each
# run by the chart's `command`.
# Build: docker build -t kube-retention:dev .
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
