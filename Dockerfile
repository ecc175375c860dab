# syntax=docker/dockerfile:1
#
# One image with both agents; it runs the member agent by default:
#   make image          # without Docker: hack/image builds what this file says
#   make docker-build   # with a Docker engine: docker build -t fleetmirror:dev .
# Both stamp the binaries with the version (--version, fleetmirror_build_info);
# by hand:
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run --rm fleetmirror:dev --help
# The hub is the other binary:
#   docker run --rm --entrypoint /usr/local/bin/fleetmirror-hub fleetmirror:dev --help
# (in a Pod: command: ["/usr/local/bin/fleetmirror-hub"]).
#
# hack/image reads this file, so keep to what it understands: in the final
# stage ARG, LABEL, COPY --from, USER and an exec-form ENTRYPOINT; in the
# builder, the go build commands of a RUN. The final stage is FROM scratch:
# the binaries are static, the user is numeric, and neither agent needs a
# CA bundle (their CAs come from the kubeconfig or the ServiceAccount).

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG VERSION=dev
ARG REVISION=unknown
RUN LDFLAGS="-s -w -X github.com/fleetmirror/fleetmirror/pkg/version.Version=${VERSION} -X github.com/fleetmirror/fleetmirror/pkg/version.Revision=${REVISION}" && \
    CGO_ENABLED=0 go build -trimpath -ldflags="${LDFLAGS}" -o /out/fleetmirror-member ./cmd/member && \
    CGO_ENABLED=0 go build -trimpath -ldflags="${LDFLAGS}" -o /out/fleetmirror-hub ./cmd/hub

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/fleetmirror/fleetmirror"
COPY --from=builder /out/fleetmirror-member /out/fleetmirror-hub /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetmirror-member"]
