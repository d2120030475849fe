# mail-inbox: the agent zone's door: one mailbox as HTML.
# FROM scratch: the static binary and the directories below, with their
# owners; no shell, no libc, no /etc/passwd (ids are numeric everywhere).
# It runs as its zone's own uid/gid 10003; compose adds the socket group 10000.
#
# Directories (build.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir run/mailplane          10001:10000 2750   the plane's socket (mounted read-only)
# dir run/secrets/mailplane  10001:10003 2750   this zone's secrets, readable by its gid only (mounted read-only)
FROM scratch
ADD dirs.tar /
COPY mail-inbox /mail-inbox
LABEL org.websitebench.mailplane.image="mail-inbox"
USER 10003:10003
ENTRYPOINT ["/mail-inbox"]
