# syntax=docker/dockerfile:1
#
# One image with both agents; it runs the member agent by default:
#   docker build -t fleetmirror:dev .          # or: make docker-build
#   docker run --rm fleetmirror:dev --help
# The hub is the other binary:
#   docker run --rm --entrypoint /usr/local/bin/fleetmirror-hub fleetmirror:dev --help
# (in a Pod: command: ["/usr/local/bin/fleetmirror-hub"]).

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/fleetmirror-member ./cmd/member && \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/fleetmirror-hub ./cmd/hub

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/fleetmirror-member /out/fleetmirror-hub /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetmirror-member"]
