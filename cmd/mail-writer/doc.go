// Command mail-writer is the candidate's write-only mail door: the website
// under test sends mail through it and can do nothing else.
//
// Security contract. It listens on two TCP sockets, one for HTTP (Resend-
// style POST /emails, GET /internal/bootstrap, GET /healthz) and one for
// SMTP, each with at most 16 connections, a 10 s idle bound and a 30 s
// lifetime by default; with --tls-cert it also offers STARTTLS, and may
// listen for SMTP with implicit TLS and for HTTPS, with the same limits.
// Its secrets are its own writer grant (read once from --grant-file), bound
// by the plane to one trial, and the private key of its TLS leaf (issued by
// the plane's local CA, whose key it never sees). It holds no mail-API
// token, bootstrap token or capability: it passes the credential a client
// presented (a Bearer token, an SMTP AUTH password) to the plane, which
// checks it. It may make four plane calls, send, bootstrap, health and
// report (a count of SMTP sessions it closed over its connection cap, for
// the trial's trail), and cannot read mail, nor its trail: the plane
// refuses any
// other method for a writer grant, and this binary links no store (see
// deps_test.go). Every answer it gives an untrusted client is a short fixed
// text; secrets never reach its log.
//
// It is started by mail-plane up, by a service manager (sockets may be
// passed as fd:N or systemd:NAME), or by hand:
//
//	mail-writer --plane-socket /run/mailplane/plane.sock --grant-file writer.grant \
//	    --http-listen 127.0.0.1:8025 --smtp-listen 127.0.0.1:1025 --smtp-mode fixed
package main
