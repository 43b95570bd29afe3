# plantstore: a static binary on a non-root runtime image, built with
# BuildKit (Docker 23 and later by default; DOCKER_BUILDKIT=1 before).
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t plantstore:v0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   # one image per platform, cross-compiled
#
# Base images. Each is a build argument, so a mirror or a locally made image
# can stand in, and each should be pinned by digest in a release build:
#
#   --build-arg GO_IMAGE=golang:1.26.8-bookworm@sha256:<digest of the index>
#   --build-arg RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:<digest of the index>
#
# The digest of a multi-platform index (what "docker buildx imagetools
# inspect <tag>" prints first) pins every platform at once. The defaults
# below are tags only: this repository's CI cannot reach a registry to read
# or verify a digest, and a digest written here unchecked would be worse
# than none. deploy/check/image.sh builds with digest-pinned references to a
# local registry, and a wrong digest is shown to fail the build.

# GO_IMAGE is the Go toolchain image the binary is built in.
ARG GO_IMAGE=golang:1.26.8-bookworm
# RUNTIME_IMAGE is the static non-root image the binary runs on.
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

# The build stage runs on the builder's own platform and compiles for the
# target's (TARGETOS/TARGETARCH, set by BuildKit from --platform): no
# emulation, and the Go caches are the builder's.

# build compiles a static, trimmed, stripped binary stamped with VERSION and REVISION.
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath GOMODCACHE=/go/pkg/mod GOCACHE=/root/.cache/go-build
# Modules first: this step reruns only when go.mod or go.sum change, and the
# module cache mount keeps what earlier builds downloaded.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
# The build tags leave out what the service never uses: nomsgpack gin's
# MessagePack codec (ugorji/go), grpcnotrace grpc's x/net/trace debug pages,
# whose templates kept every exported method in the binary. Together they
# take 39 % off the binary (docs/performance.md). .ci/build reads the tags
# from the go build line below.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -buildvcs=false -tags nomsgpack,grpcnotrace -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/plantstore .

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="plantstore" \
      org.opencontainers.image.description="The Plant Store API: GET /plants behind bearer JWT verification" \
      org.opencontainers.image.source="https://github.com/plantstore/plantstore" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/plantstore /plantstore
# The distroless nonroot user; numeric, so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/plantstore"]
CMD ["serve"]
