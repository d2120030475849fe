package main

import (
	"context"
	"fmt"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Concurrencies of the ingest figures (the issue's).
var concurrencies = []int{1, 8, 64}

// perConn are the SMTP shapes: a site that connects for each mail, and one
// that keeps its connection for 50.
var perConn = []int{1, 50}

// ingestAll measures both stores.
func (h *harness) ingestAll(ctx context.Context) error {
	if err := h.ingestEmbedded(ctx); err != nil {
		return err
	}
	return h.ingestMailpit(ctx)
}

// ingestEmbedded is mailplane on its embedded store (mail-writer in front
// of mail-plane serve) next to a null HTTP handler and a null go-smtp
// server; and the plane's send RPC alone next to its health RPC.
func (h *harness) ingestEmbedded(ctx context.Context) error {
	pl, err := h.startPlane(ctx, "plane-sqlite")
	if err != nil {
		return err
	}
	w, id, err := h.trialWriter(ctx, pl)
	if err != nil {
		return err
	}
	nh, err := h.startNull(ctx, "http")
	if err != nil {
		return err
	}
	ns, err := h.startNull(ctx, "smtp")
	if err != nil {
		return err
	}
	// The peer: raw Mailpit, what a user would run instead, taking turns
	// with mailplane and the null server in each figure it has one for.
	peer, err := h.startPeer(ctx, "mailpit-peer")
	if err != nil {
		return err
	}
	const store = "embedded"
	pc := rpc.NewClient(pl.socket, id.WriterGrant)
	defer pc.Close()
	for _, size := range sizes {
		post, data := emailJSON(size.Bytes), rfc5322(size.Bytes)
		peerPost := mailpitSendJSON(size.Bytes)
		raw := crlf(string(data))
		for _, conc := range concurrencies {
			// The plane alone, as the writer calls it: the ceiling of any
			// door in front of it.
			if err := h.ingestPair(ctx, store, planeSend, size.Name, conc,
				rpcSendWorkers([]*rpc.Client{pc}, raw), "plane health RPC", rpcHealthWorkers(pc)); err != nil {
				return err
			}
			subj, closeS := postWorkers(w.url+"/emails", id.MailAPIToken, post, conc)
			base, closeB := postWorkers("http://"+nh.addr+"/emails", id.MailAPIToken, post, conc)
			mp, closeP := postWorkers("http://"+peer.httpAddr+"/api/v1/send", "", peerPost, conc)
			err := h.ingestTrio(ctx, store, "POST /emails", size.Name, conc, subj, "null HTTP handler", base,
				&sideSpec{"raw Mailpit, POST /api/v1/send", mp})
			closeS()
			closeB()
			closeP()
			if err != nil {
				return err
			}
			for _, n := range perConn {
				err := h.ingestTrio(ctx, store, smtpPath(n), size.Name, conc,
					smtpWorkers(tcpDialer(w.smtpAddr), data, n), "null go-smtp server", smtpWorkers(tcpDialer(ns.addr), data, n),
					&sideSpec{"raw Mailpit, " + smtpPath(n), smtpWorkers(tcpDialer(peer.smtpAddr), data, n)})
				if err != nil {
					return err
				}
			}
		}
	}
	if err := h.ingestProviders(ctx, store, pl, w, id); err != nil {
		return err
	}
	for _, p := range []*proc{pl.proc, w.proc, nh.proc, ns.proc, peer.proc} {
		h.report.noteRSS("after ingest (embedded store)", p)
	}
	return nil
}

// ingestMailpit is mailplane on the Mailpit store (mail-writer in front of
// mail-plane serve --store mailpit) next to raw SMTP into the same Mailpit
// over its Unix socket, as a user of Mailpit alone would send. POST
// /emails keeps its connection, so its baseline is raw SMTP with 50
// messages per connection.
func (h *harness) ingestMailpit(ctx context.Context) error {
	mp, err := h.startMailpit(ctx, "mailpit")
	if err != nil {
		return err
	}
	pl, err := h.startPlane(ctx, "plane-mailpit", "--store", "mailpit", "--mailpit-socket", mp.http, "--mailpit-smtp-socket", mp.smtp)
	if err != nil {
		return err
	}
	w, id, err := h.trialWriter(ctx, pl)
	if err != nil {
		return err
	}
	const store = "Mailpit"
	raw := unixDialer(mp.smtp)
	for _, size := range sizes {
		post, data := emailJSON(size.Bytes), rfc5322(size.Bytes)
		for _, conc := range concurrencies {
			subj, closeS := postWorkers(w.url+"/emails", id.MailAPIToken, post, conc)
			err := h.ingestPair(ctx, store, "POST /emails", size.Name, conc, subj, "raw Mailpit, SMTP 50/conn", smtpWorkers(raw, data, 50))
			closeS()
			if err != nil {
				return err
			}
			for _, n := range perConn {
				err := h.ingestPair(ctx, store, smtpPath(n), size.Name, conc,
					smtpWorkers(tcpDialer(w.smtpAddr), data, n), "raw Mailpit, "+smtpPath(n), smtpWorkers(raw, data, n))
				if err != nil {
					return err
				}
			}
		}
	}
	for _, p := range []*proc{pl.proc, w.proc, mp.proc} {
		h.report.noteRSS("after ingest (Mailpit store)", p)
	}
	return nil
}

// planeSend is the path of sends straight into the plane's socket.
const planeSend = "plane send RPC"

func smtpPath(perConn int) string { return fmt.Sprintf("SMTP %d/conn", perConn) }

// ingestPair measures one ingest figure and records it.
func (h *harness) ingestPair(ctx context.Context, store, path, size string, conc int, subj workerFactory, baseLabel string, base workerFactory) error {
	return h.ingestTrio(ctx, store, path, size, conc, subj, baseLabel, base, nil)
}

// ingestTrio measures one ingest figure, with the peer taking turns too
// when there is one, and records it.
func (h *harness) ingestTrio(ctx context.Context, store, path, size string, conc int, subj workerFactory, baseLabel string, base workerFactory, peer *sideSpec) error {
	specs := []sideSpec{{baseLabel, base}, {"mailplane", subj}}
	if peer != nil {
		specs = append(specs, *peer)
	}
	l, err := turns(ctx, h.cell, conc, specs...)
	if err != nil {
		return err
	}
	p := Pair{Section: "ingest", Store: store, Path: path, Size: size, Conc: conc, Mailplane: l[1], Baseline: l[0]}
	peerNote := ""
	if peer != nil {
		p.Peer = &l[2]
		peerNote = fmt.Sprintf("  peer %7.0f/s p99 %6.1fms", l[2].Rate, l[2].P99)
	}
	h.report.add(p)
	h.logf("  %-8s %-13s %-7s c%-2d  mailplane %7.0f/s p99 %6.1fms  %s %7.0f/s p99 %6.1fms%s  %s",
		store, path, size, conc, p.Mailplane.Rate, p.Mailplane.P99, baseLabel, p.Baseline.Rate, p.Baseline.P99, peerNote, p.errNote())
	return nil
}
