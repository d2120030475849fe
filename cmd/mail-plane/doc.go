// Command mail-plane is the broker of mailplane: the only process that
// touches storage, and the one that authorizes every read and write.
//
// Security contract. mail-plane serve listens on one Unix socket only (a
// directory it creates 0750, the socket 0660) and binds no TCP port: it
// runs with no network at all (network_mode: none, PrivateNetwork=yes).
// Every connection is identified by the kernel (SO_PEERCRED, numeric
// uid/gid, checked against per-role allow lists, before any grant is looked
// up) and every call by a grant; the calls a grant may make, and what each
// is bound to, are the rows of one table (internal/plane/policy.go;
// `mail-plane policy` prints it). It holds
// the ledger (hashed grants, capabilities and tokens; quotas; idempotency
// keys; the message index; every trial's trail) and the message store:
// embedded SQLite, Mailpit over its Unix sockets, or (--store postgres)
// one PostgreSQL database that several planes share, whose DSN only the
// plane holds. Its Ed25519 evidence key, which signs trail heads, never
// leaves its data directory. It writes admin.grant, gateway.grant and
// the shared writer's and inbox's writer.grant and inbox.grant (0600) into
// its data directory on first start, and hands each trial's secrets out
// once, when the trial opens. Its umask is 077: nothing it creates is
// readable by another user unless it says so (the socket, its directory).
//
// Shared mode: mail-plane up is a supervisor, not the broker. It runs
// serve and one mail-writer, mail-inbox and mail-gateway as child
// processes, each holding only its own secrets, that serve every trial:
// the shared writer and inbox grants open no trial by themselves, and the
// plane binds each of their calls to the trial the caller's credential
// (or, at the writer, the port or namespace door it came in by) opens. up
// binds every TCP port, the surfaces', one SMTP port per trial and, for a
// trial opened with --netns, that trial's doors inside the candidate's
// network namespace (which needs CAP_SYS_ADMIN), and hands each listening
// socket to the child that serves it (the writer never binds a port
// itself). Trials are opened and closed on the running stack (trial.open,
// trial.close); the number of processes does not grow with them.
//
// up also runs two children that are mail-plane itself, each with less
// than the plane: mail-plane hooks, the webhook deliverer, holds only a
// hooks grant, whose one pair of calls (webhooks.take, webhooks.report)
// hands it each request already signed by the plane: it holds no trial's
// key, reads no mail and chooses no URL (only the admin sets one). It
// dials the candidates' endpoints, with a bounded time and body per
// attempt and a per-trial share; a netns trial's endpoint through a
// socket up connects inside that trial's namespace (only in a namespace
// of a door up bound, only to an IP address or localhost). mail-plane
// route, the sidecar's API router, serves untrusted HTTP and holds no
// grant. A trial opened with --agent-netns has its inbox doors (IMAP with
// plain LOGIN, the pages, MCP) bound inside the agent's namespace and
// handed to mail-inbox, as the candidate's are to the writer.
//
// Strict mode: mail-plane trial create mints a trial with a writer grant
// and an inbox grant bound to it, for one mail-writer and one mail-inbox
// process per trial (build/'s compose file and systemd units), so that the
// kernel, not the plane, keeps one candidate's door from another's; the
// gateway stays shared. mail-plane sidecar runs one such trial behind the
// reference's ports, as its drop-in.
//
// Candidate bytes. The plane parses a candidate's message once, when it
// accepts it (a send, or the evaluator's plant): it scrubs the header
// (internal/mailmsg, within limits.HeaderLines and limits.HeaderBytes),
// then indexes the message (internal/mailindex: MIME parts, the HTML's
// text, header fields, attachments, codes and links), each step linear in
// the message, which limits.MessageBytes bounds. The index is stored with
// the message in the send's transaction, and every read, the console's
// and a click's serve it: no read parses a candidate's bytes, except a
// message stored by a build older than the index, which is parsed on its
// read as before.
//
// The operator's commands (trial, grant, env, evidence) are clients of a
// running plane's socket; wait reads the gateway and redact reads files.
// The local CA's key (mail-plane ca) stays in the plane's data directory,
// 0600: the writer gets only a leaf certificate and its key, candidates
// only the CA certificate.
package main
