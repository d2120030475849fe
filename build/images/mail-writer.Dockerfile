# mail-writer: the candidate zone's door: POST /emails and SMTP in, send RPC out.
# FROM scratch: the static binary and the directories below, with their
# owners; no shell, no libc, no /etc/passwd (ids are numeric everywhere).
# It runs as its zone's own uid/gid 10002; compose adds the socket group 10000.
#
# Directories (build.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir run/mailplane          10001:10000 2750   the plane's socket (mounted read-only)
# dir run/secrets/mailplane  10001:10002 2750   this zone's secrets, readable by its gid only (mounted read-only)
FROM scratch
ADD dirs.tar /
COPY mail-writer /mail-writer
LABEL org.websitebench.mailplane.image="mail-writer"
USER 10002:10002
ENTRYPOINT ["/mail-writer"]
