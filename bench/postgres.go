package main

import (
	"context"
	"fmt"
	"os"

	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// postgresStore is the store label of the --store postgres figures.
const postgresStore = "PostgreSQL"

// postgres measures mail-plane serve --store postgres on a PostgreSQL of
// this run (Debian's binaries, fsync on, as pgtest starts it) next to the
// embedded store in the same run: POST /emails through mail-writer, and
// list and latest through mail-gateway; then two planes on the database,
// the clients split across their writers, next to one plane.
func (h *harness) postgres(ctx context.Context) error {
	pg, err := pgtest.Launch(true)
	if pg != nil {
		defer pg.Close()
	}
	if err != nil {
		return err
	}
	dsn, err := pg.NewDB()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(h.procs.dir, "pg")
	if err != nil {
		return err
	}
	dsnFile, err := writeSecret(dir, "dsn", dsn)
	if err != nil {
		return err
	}
	onPG := []string{"--store", "postgres", "--dsn-file", dsnFile}
	pgPlane, err := h.startPlane(ctx, "plane-postgres", onPG...)
	if err != nil {
		return err
	}
	sqPlane, err := h.startPlane(ctx, "plane-sqlite-vs-postgres")
	if err != nil {
		return err
	}
	pgW, pgID, err := h.trialWriter(ctx, pgPlane)
	if err != nil {
		return err
	}
	sqW, sqID, err := h.trialWriter(ctx, sqPlane)
	if err != nil {
		return err
	}
	size := sizes[0]
	post := emailJSON(size.Bytes)
	for _, conc := range concurrencies {
		subj, closeS := postWorkers(pgW.url+"/emails", pgID.MailAPIToken, post, conc)
		base, closeB := postWorkers(sqW.url+"/emails", sqID.MailAPIToken, post, conc)
		err := h.ingestPair(ctx, postgresStore, "POST /emails", size.Name, conc, subj, "embedded store, POST /emails", base)
		closeS()
		closeB()
		if err != nil {
			return err
		}
	}
	if err := h.readsVs(ctx, pgPlane, sqPlane); err != nil {
		return err
	}
	// A second plane on the same database, with its writer: the clients
	// take turns between the two planes' writers, next to all on one.
	second, err := h.startPlane(ctx, "plane-postgres-2", onPG...)
	if err != nil {
		return err
	}
	// The trial's writer grant, minted through the first plane, serves
	// on the second.
	w2, err := h.startSurface(ctx, "mail-writer", second, pgID.WriterGrant, "")
	if err != nil {
		return err
	}
	for _, conc := range concurrencies[1:] {
		one, closeO := postWorkers(pgW.url+"/emails", pgID.MailAPIToken, post, conc)
		two, closeT := postWorkers(w2.url+"/emails", pgID.MailAPIToken, post, conc)
		split := func(i int) (worker, error) {
			if i%2 == 1 {
				return two(i)
			}
			return one(i)
		}
		err := h.ingestPair(ctx, postgresStore, "POST /emails, 2 planes", size.Name, conc, split, "1 plane, POST /emails", one)
		closeO()
		closeT()
		if err != nil {
			return err
		}
	}
	for _, p := range []*proc{pgPlane.proc, second.proc, pgW.proc, w2.proc} {
		h.report.noteRSS("after the PostgreSQL figures", p)
	}
	return nil
}

// readsVs measures list and latest through a gateway of pg next to the
// same reads through a gateway of sq, each on a namespace of listSize
// messages among backgroundMessages of another trial.
func (h *harness) readsVs(ctx context.Context, pg, sq *plane) error {
	var urls [2]string
	var ids [2]rpc.Identity
	for i, pl := range []*plane{pg, sq} {
		var err error
		if _, urls[i], ids[i], err = h.readTarget(ctx, pl); err != nil {
			return err
		}
	}
	for _, conc := range readConcurrencies {
		hc := httpClient(conc)
		for _, f := range []struct{ path, suffix string }{{"list of 32", ""}, {"latest", "/latest"}} {
			s, b, err := pair(ctx, h.cell, conc, "mailplane", getWorkers(hc, urls[0]+f.suffix, ids[0].ReadCapability),
				"embedded store: "+f.path, getWorkers(hc, urls[1]+f.suffix, ids[1].ReadCapability))
			if err != nil {
				return fmt.Errorf("reads on PostgreSQL: %w", err)
			}
			h.addRead(Pair{Section: "reads", Store: postgresStore, Path: f.path, Conc: conc, Mailplane: s, Baseline: b})
		}
		hc.CloseIdleConnections()
	}
	return nil
}
