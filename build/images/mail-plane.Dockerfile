# mail-plane: the broker, in the container that has no network at all
# (network_mode: none). FROM scratch: the static binary and the directories
# below, with their owners; no shell, no libc, no /etc/passwd (ids are
# numeric everywhere).
#
# Directories (build.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir run/mailplane      10001:10000 2750   the socket: set-group-ID "mailplane" (10000), so only the surfaces reach it
# dir var/lib/mailplane  10001:10001 0700   the plane's database and the grants it writes on first start
# dir secrets/writer     10001:10002 2750   one-shot admin runs write each surface's secrets (0640) into a
# dir secrets/inbox      10001:10003 2750   volume whose set-group-ID group is that surface's own gid,
# dir secrets/gateway    10001:10004 2750   so that no other zone can read them
# dir secrets/console    10001:10006 2750
FROM scratch
ADD dirs.tar /
COPY mail-plane /mail-plane
LABEL org.websitebench.mailplane.image="mail-plane"
USER 10001:10001
ENTRYPOINT ["/mail-plane"]
CMD ["serve"]
