# mail-gateway: the evaluator zone's door: the Bearer-gated JSON API.
# FROM scratch: the static binary and the directories below, with their
# owners; no shell, no libc, no /etc/passwd (ids are numeric everywhere).
# It runs as its zone's own uid/gid 10004; compose adds the socket group 10000.
#
# Directories (build.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir run/mailplane          10001:10000 2750   the plane's socket (mounted read-only)
# dir run/secrets/mailplane  10001:10004 2750   this zone's secrets, readable by its gid only (mounted read-only)
FROM scratch
ADD dirs.tar /
COPY mail-gateway /mail-gateway
LABEL org.websitebench.mailplane.image="mail-gateway"
USER 10004:10004
ENTRYPOINT ["/mail-gateway"]
