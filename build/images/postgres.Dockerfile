# postgres: the PostgreSQL zone (build/docker-compose.postgres.yml), built
# by build/images/postgres.sh from this machine's Debian packages: no image
# is pulled. FROM scratch: Debian's postgres server binary and exactly the
# shared libraries ldd names for it (with the dynamic loader), the files it
# reads from /usr/share/postgresql/<v>, the C locale only, a cluster initdb
# made at build time (/initdb, copied into the volume on the first start),
# /etc/passwd and /etc/group naming the one unprivileged user, and pg-entry
# (build/pgentry), which starts it. No shell, no initdb, no client.
#
# Directories (postgres.sh turns these lines into dirs.tar; a named volume
# mounted on one of them starts with its owner and mode):
# dir var/lib/postgresql  10005:10005 0700   the data directory's volume
FROM scratch
ADD rootfs.tar /
ADD dirs.tar /
COPY pg-entry /pg-entry
LABEL org.websitebench.mailplane.image="postgres"
ENV TZ=UTC
USER 10005:10005
ENTRYPOINT ["/pg-entry"]
