# syntax=docker/dockerfile:1
# The gateway as a container: a static binary (no cgo: Badger, the WhatsApp store's SQLite and
# everything else are pure Go) on a distroless base, run as a non-root user, with its data
# (Badger, the dev issuer key, the sim's journal, the WhatsApp store) on the /data volume.
#   docker build -t gateway .
#   docker run -p 8080:8080 -v gateway-data:/data gateway
# Every flag is also an environment variable: `docker run gateway serve --help` lists them.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces go.mau.fi/util and go.mau.fi/whatsmeow with the patched copies there
# (third_party/README.md).
COPY third_party ./third_party
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway . \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
# The volume's mount point, owned by the nonroot user (65532) so a fresh volume is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV GATEWAY_ADDR=:8080 \
    GATEWAY_DATA=/data
VOLUME ["/data"]
EXPOSE 8080
# distroless has no shell or curl: the binary checks itself (GET /readyz on its own address).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
