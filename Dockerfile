# syntax=docker/dockerfile:1
# The gateway and the mock upstream in one small image (docker-compose.yml
# runs both from it). Build: docker build -t llmgw/gateway .

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
# Modules first, so source edits do not refetch them.
COPY go.mod go.sum ./
RUN go mod download
# Only what the binaries are built from: the rest of the checkout (data/, bin/,
# .git) never enters the build.
COPY cmd ./cmd
COPY internal ./internal
COPY migrations ./migrations
RUN go build -ldflags="-s -w" -o /out/gateway ./cmd/gateway \
 && go build -ldflags="-s -w" -o /out/mockupstream ./cmd/mockupstream \
 && mkdir -p /out/spool

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /out/mockupstream /usr/local/bin/
# The record spool, owned by the nonroot user (65532); a volume mounted here
# starts with this ownership.
COPY --from=build --chown=65532:65532 /out/spool /var/lib/gateway/spool
ENV GATEWAY_LISTEN_ADDR=:8080 \
    GATEWAY_CONFIG=/etc/gateway/gateway.yaml \
    GATEWAY_SPOOL_DIR=/var/lib/gateway/spool \
    GATEWAY_LOG_FORMAT=json
USER nonroot:nonroot
EXPOSE 8080
# No CMD: the gateway serves by default, and a service that swaps the
# entrypoint for mockupstream gets no stray argument.
ENTRYPOINT ["/usr/local/bin/gateway"]
