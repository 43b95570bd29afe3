# plantstore: a static binary on a non-root runtime image.
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t plantstore:v0.1.0 .
#
# The base images are build arguments, so a mirror or a locally made image can
# stand in for the public ones.

# GO_IMAGE is the Go toolchain image the binary is built in.
ARG GO_IMAGE=golang:1.26.8-bookworm
# RUNTIME_IMAGE is the static non-root image the binary runs on.
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

# build compiles a static, trimmed binary stamped with VERSION and REVISION.
FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN go build -buildvcs=false -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/plantstore .

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
