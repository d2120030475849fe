package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Strangers before they are known (issue 32): on one `mail-plane up
// --trials 0`, trial B's POST /emails (one client, kept alive) alone, and
// while preauthStrangers connections with random tokens each declare a
// 4 MiB batch and send all of it but its last byte, opening a new one for
// each the writer closes. The writer refuses each at once, from its
// header, without reading the body.
const (
	preauthStrangers = 60
	preauthDeclared  = 4 << 20
	preauthTurns     = 2
	preauthPosts     = 300
	preauthTurn      = 5 * time.Second
	preauthPath      = "POST /emails, B under 60 strangers' 4 MiB bodies"
	// goalPreauthRatio: B's p99 under the strangers within 2× alone.
	goalPreauthRatio = 2.0
)

// preauth measures B alone and under the strangers and records the pair.
func (h *harness) preauth(ctx context.Context) error {
	up, admin, err := h.startUpAdmin(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	defer admin.Close()
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		return fmt.Errorf("trial.open B: %w", err)
	}
	w, err := url.Parse(up.bundle.WriterURL)
	if err != nil || w.Host == "" {
		return fmt.Errorf("mail-plane up --json: writer URL %q", up.bundle.WriterURL)
	}
	hc := httpClient(1)
	defer hc.CloseIdleConnections()
	return h.aloneAndUnder(ctx, "preauth", preauthPath, "B under strangers", fairPoster(hc, b), preauthTurns, preauthPosts, preauthTurn, func() (func(), error) {
		f, err := h.startLoad(ctx, "strangers", "the strangers", []string{"-strangers", w.Host}, preauthStrangers*9/10)
		if err != nil {
			return nil, err
		}
		return f.stop, nil
	})
}

// holdStrangers is the -strangers process: preauthStrangers connections
// to the writer at addr, each a 4 MiB batch with a random token whose
// last byte is held back, opened again when the writer closes them,
// until it is killed.
func holdStrangers(addr string) {
	chunk := []byte(strings.Repeat(" ", 64<<10))
	for range preauthStrangers {
		go func() {
			for {
				c := redial(addr)
				tok := make([]byte, 16)
				rand.Read(tok)
				fmt.Fprintf(c, "POST /emails/batch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer re_%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[",
					hex.EncodeToString(tok), preauthDeclared)
				for left := preauthDeclared - 2; left > 0; left -= len(chunk) {
					if _, err := c.Write(chunk[:min(len(chunk), left)]); err != nil {
						break
					}
				}
				io.Copy(io.Discard, c) // until the writer closes it
				c.Close()
			}
		}()
	}
	select {}
}

// preauthGoal: B's p99 under the strangers within goalPreauthRatio × alone.
func (r *Report) preauthGoal() {
	r.aloneGoal("preauth", preauthPath, "under 60 strangers' 4 MiB bodies", goalPreauthRatio)
}

// preauthMarkdown is the section's table.
func (r *Report) preauthMarkdown(w func(string, ...any)) {
	r.aloneMarkdown(w, "preauth", "Strangers before they are known: unauthenticated bodies against a trial's POST /emails", fmt.Sprintf(
		"One `mail-plane up --trials 0` with trial B. B posts 512 B one at a time on one kept-alive connection, %d turns alone and %d under the strangers, each of at least %d posts and %v. The strangers run in a process of their own: %d connections to the writer's HTTP port, each a `POST /emails/batch` with a random token declaring %d MiB and sending all but its last byte, opened again when the writer closes it.",
		preauthTurns, preauthTurns, preauthPosts, preauthTurn, preauthStrangers, preauthDeclared>>20))
}
