// Command mail-gateway is the evaluator's door into mailplane: a
// Bearer-gated JSON API that reads any trial's mail and trail, and waits
// for them.
//
// Security contract. It listens on one TCP socket (--listen: host:port,
// fd:N or systemd:NAME) meant for the trusted evaluator only, and talks to
// mail-plane over its Unix socket. It holds one secret, the gateway grant
// (--grant-file), which by itself opens nothing: its only plane calls are
// health, read.check (before a read waits), list, latest, get and events,
// and each must carry the read capability its own caller presented as "Authorization: Bearer <cap>",
// which the plane checks (the gateway keeps no capability and never logs
// one). It cannot write mail, create or change trials, or touch storage;
// it does not link the store. Outages answer 503, refusals 4xx.
//
// Shared and strict mode alike: one gateway serves every trial of its
// plane (mail-plane up runs one; strict mode, one writer and inbox per
// trial, keeps one gateway too), since the capability a caller presents
// names its namespace. Its connections, many and long because a waiting
// read holds one for up to 60 s, share one cap sized to the process, under
// which a connection not answering a request may be closed to make room;
// each read capability has its share of requests in flight (one more is
// 429 trial_busy), and a request's header must arrive within 5 s.
//
// Routes: GET /healthz; GET /api/namespaces/{ns}/messages (?recipient=,
// ?after=ID, ?wait=DURATION of at most 60s), …/messages/latest (same
// query), …/messages/{id}; …/events (the trial's trail, ?after=SEQ,
// ?wait=DURATION, or Server-Sent Events); GET /inbox/{ns} and
// /inbox/{ns}/messages/{id}, the same mail as HTML pages. Every error is
// JSON: {"error": code, "name", "message", "statusCode"}.
package main
