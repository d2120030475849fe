// Command mail-writer is the candidate's write-only mail door: the website
// under test sends mail through it and can do nothing else.
//
// Security contract. It serves HTTP (Resend-style POST /emails and
// /emails/batch, GET /internal/bootstrap, GET /healthz) and SMTP; with
// --tls-cert also STARTTLS, SMTP with implicit TLS (--smtp-tls-listen) and
// HTTPS (--https-listen). Its secrets are its writer grant (read once from
// --grant-file) and the private key of its TLS leaf (issued by the plane's
// local CA, whose key it never sees). It holds no mail-API token,
// bootstrap token or capability of its own: it passes the credential a
// client presented (a Bearer token, an SMTP AUTH password) to the plane,
// which checks it. It may make six plane calls: send, credential.check
// (SMTP AUTH, and a request's credential before its form), send.refused (a
// request it refused for its form, for the trial's trail), bootstrap,
// health and report (a count of SMTP sessions it closed over its
// connection cap, for the trial's trail). It cannot read mail, nor any
// trail: the plane refuses every other method for a writer grant, and this
// binary links no store (see deps_test.go). Every answer it gives an untrusted client is a
// short fixed text; secrets never reach its log.
//
// Shared mode (mail-plane up): one writer serves every trial of its plane,
// with the plane's shared writer grant, which by itself opens no trial:
// each call is bound to the trial that the client's credential opens, or
// that owns the SMTP port or network-namespace door the message came in
// by. The writer binds no port. up binds the shared listeners, one SMTP
// port per trial and, for a trial opened with a network namespace, that
// trial's doors inside it, and hands each listening socket over
// (--port-control, SCM_RIGHTS). On the shared SMTP port and on every
// trial's own port, MAIL before a good AUTH is refused (530) unless
// --smtp-plain-ports, and three failed AUTHs end a session; plain SMTP on
// a door inside a namespace needs no AUTH, since only that namespace can
// reach it. All its listeners share one connection cap sized to the
// process (--max-connections 0) with short waits for a client
// (--idle-timeout 5s), and each trial has its share of requests and SMTP
// messages in flight, and of the body bytes the writer holds, taken
// before a body is read (internal/limits). The trade: a compromised shared
// writer could write into any trial, by a port a trial owns or a
// credential it has seen; it can still never read.
//
// Strict mode (mail-plane trial create, one writer per trial, as build/'s
// compose file and systemd units run it): its grant is bound by the plane
// to one trial, so it can write only there whatever a client presents.
// Each listener keeps the reference's limits by default: at most 16
// connections (--max-connections), a 10 s idle bound and a 30 s lifetime.
// With --smtp-mode fixed every message goes to its trial; with select (the
// drop-in sidecar) the X-WebsiteBench-Namespace/-Capability headers choose
// a namespace, which the plane checks.
//
// It is started by mail-plane up or sidecar, by a service manager (sockets
// may be passed as fd:N or systemd:NAME), or by hand:
//
//	mail-writer --plane-socket /run/mailplane/plane.sock --grant-file writer.grant \
//	    --http-listen 127.0.0.1:8025 --smtp-listen 127.0.0.1:1025 --smtp-mode fixed
package main
