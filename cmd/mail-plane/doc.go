// Command mail-plane is the broker of mailplane: the only process that
// touches storage, and the one that authorizes every read and write.
//
// Security contract. mail-plane serve listens on one Unix socket only (a
// directory it creates 0750, the socket 0660) and binds no TCP port: it
// runs with no network at all (network_mode: none, PrivateNetwork=yes).
// Every connection is identified by the kernel (SO_PEERCRED, numeric
// uid/gid, checked against per-role allow lists, before any grant is looked
// up) and every call by a grant; the calls a grant may make, and what each
// is bound to, are the rows of one table (internal/plane/authz.go). It holds
// the ledger (hashed grants, capabilities and tokens; quotas; idempotency
// keys; the message index) and the message store (embedded SQLite, or
// Mailpit over its Unix sockets). It writes admin.grant, gateway.grant and
// the shared writer's and inbox's writer.grant and inbox.grant (0600) into
// its data directory on first start, and hands each trial's secrets out
// once, when the trial opens. Its umask is 077: nothing it creates is
// readable by another user unless it says so (the socket, its directory).
//
// mail-plane up and mail-plane sidecar are supervisors, not the broker:
// they do bind TCP, the surfaces' ports and (up) one SMTP port per
// trial, and hand each listening socket to the child that serves
// it (the writer never binds a port itself). They run serve and the
// surfaces as child processes; each child holds only its own secrets.
// The operator's commands (trial, grant, env, wait, redact) are clients of
// a running plane's socket. The local CA's key (mail-plane ca) stays in the
// plane's data directory, 0600: the writer gets only a leaf certificate and
// its key, candidates only the CA certificate.
package main
