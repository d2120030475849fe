# mail-console: the operator zone's read-only console (trials, their mail
# and trails, Prometheus metrics). It holds only its console grant, which
# reads nothing by itself: every page needs the operator's admin grant.
# FROM scratch: the static binary and the directories below, with their
# owners; no shell, no libc, no /etc/passwd (ids are numeric everywhere).
# It runs as its zone's own uid/gid 10006; compose adds the socket group 10000.
#
# Directories (build.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir run/mailplane          10001:10000 2750   the plane's socket (mounted read-only)
# dir run/secrets/mailplane  10001:10006 2750   this zone's secrets, readable by its gid only (mounted read-only)
FROM scratch
ADD dirs.tar /
COPY mail-console /mail-console
LABEL org.websitebench.mailplane.image="mail-console"
USER 10006:10006
ENTRYPOINT ["/mail-console"]
