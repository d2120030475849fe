// Command mail-plane is the broker of mailplane: the only process that
// touches storage, and the one that authorizes every read and write.
//
// Security contract. It listens on one Unix socket only (a directory it
// creates 0750, the socket 0660) and on no network: it runs with no network
// at all (network_mode: none, PrivateNetwork=yes). Every connection is
// identified by the kernel (SO_PEERCRED, numeric uid/gid, checked against
// per-role allow lists) and every call by a grant; the calls a grant may
// make are the rows of one table (internal/plane/authz.go). It holds the
// ledger (hashed grants, capabilities and tokens; quotas; idempotency keys;
// the message index) and the message store (embedded SQLite, or Mailpit
// over its Unix sockets). It writes admin.grant and gateway.grant (0600)
// into its data directory on first start, and hands each trial's secrets
// out once, at creation.
//
// mail-plane up also runs the three surfaces as child processes for one
// machine; each child still holds only its own secrets. The local CA's key
// (mail-plane ca) stays in the plane's data directory, 0600: the writer
// gets only a leaf certificate and its key, candidates only the CA
// certificate.
package main
