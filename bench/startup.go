package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/websitebench/mailplane/pkg/rpc"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Start-up runs: one unmeasured (the binaries into the page cache), then
// startupRuns measured.
const startupRuns = 5

// memoryMessages is how many messages the memory figures are taken after.
const memoryMessages = 10000

// upBundle is the part of mail-plane up --json's line the harness uses.
type upBundle struct {
	Env            map[string]string `json:"candidate_environment"`
	InboxURL       string            `json:"inbox_url"`
	APIURL         string            `json:"api_url"`
	Namespace      string            `json:"namespace"`
	ReadCapability string            `json:"read_capability"`
	WriterURL      string            `json:"writer_url"`
	// What a harness needs to open more trials (up --trials 0 opens none).
	PlaneSocket    string `json:"plane_socket"`
	AdminGrantFile string `json:"admin_grant_file"`
	DataDir        string `json:"data_dir"`
	// The shared listeners the fair section floods.
	SharedSMTPPort int    `json:"shared_smtp_port"`
	InboxBaseURL   string `json:"inbox_base_url"`
	// The operator's console (the console section).
	ConsoleURL string `json:"console_url"`
}

// startupAndMemory times mail-plane up --json to its JSON line (which it
// prints once every surface answers /healthz) next to Mailpit's start to
// /readyz, then takes the resident size of the last run's processes idle
// and after memoryMessages, next to Mailpit's.
func (h *harness) startupAndMemory(ctx context.Context) error {
	var up *upRun
	var ups, mps []float64
	for i := range startupRuns + 1 {
		if up != nil {
			up.stop()
		}
		var err error
		if up, err = h.startUp(ctx); err != nil {
			return err
		}
		if i > 0 {
			ups = append(ups, ms(up.took))
		}
	}
	defer up.stop()
	var mp *mailpit
	for i := range startupRuns + 1 {
		if mp != nil {
			mp.stop()
		}
		t := time.Now()
		var err error
		if mp, err = h.startMailpit(ctx, "mailpit-start"); err != nil {
			return err
		}
		if i > 0 {
			mps = append(mps, ms(time.Since(t)))
		}
	}
	h.report.Startup = []Startup{
		newStartup("mail-plane up --json (plane, trial, 3 surfaces healthy)", ups),
		newStartup("Mailpit to /readyz (baseline)", mps),
	}
	for _, s := range h.report.Startup {
		h.logf("  %-60s median %6.1fms max %6.1fms", s.What, s.Median, s.Max)
	}
	null, err := h.startNull(ctx, "http")
	if err != nil {
		return err
	}
	return h.memory(ctx, up, mp, null)
}

// upRun is one running mail-plane up.
type upRun struct {
	cmd    *exec.Cmd
	done   chan struct{}
	took   time.Duration
	bundle upBundle
	kids   map[string]int
}

// startUp runs mail-plane up --json with quotas off (and extra flags)
// and waits for its JSON line.
func (h *harness) startUp(ctx context.Context, extra ...string) (*upRun, error) {
	return h.startUpFrom(ctx, h.binDir, extra...)
}

// startUpAdmin is startUp with no trial open, and an admin client of its
// plane; stop the stack after closing the client.
func (h *harness) startUpAdmin(ctx context.Context) (*upRun, *rpc.Client, error) {
	up, err := h.startUp(ctx, "--trials", "0")
	if err != nil {
		return nil, nil, err
	}
	grant, err := rpc.ReadSecretFile(up.bundle.AdminGrantFile)
	if err != nil {
		up.stop()
		return nil, nil, err
	}
	return up, rpc.NewClient(up.bundle.PlaneSocket, grant), nil
}

// startUpFrom is startUp with the binaries of binDir (up starts the
// surfaces found next to itself).
func (h *harness) startUpFrom(ctx context.Context, binDir string, extra ...string) (*upRun, error) {
	args := append([]string{"--log-level", "warn", "up", "--json", "--quota-messages", "0", "--quota-bytes", "0"}, extra...)
	cmd := exec.Command(filepath.Join(binDir, "mail-plane"), args...)
	logf, err := os.CreateTemp(h.procs.dir, "up-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &upRun{cmd: cmd, done: make(chan struct{})}
	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(out).ReadBytes('\n')
		line <- b
		cmd.Wait()
		close(u.done)
	}()
	select {
	case b := <-line:
		u.took = time.Since(start)
		if err := json.Unmarshal(b, &u.bundle); err != nil {
			u.stop()
			body, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("mail-plane up: no JSON line (%v); its log:\n%s", err, body)
		}
	case <-time.After(startTimeout):
		u.stop()
		return nil, fmt.Errorf("mail-plane up: no JSON line within %v", startTimeout)
	case <-ctx.Done():
		u.stop()
		return nil, ctx.Err()
	}
	if u.kids, err = childrenOf(cmd.Process.Pid); err != nil {
		u.stop()
		return nil, err
	}
	for _, name := range binaries {
		if name == "mail-plane" {
			name = planeServe
		}
		if u.kids[name] == 0 {
			u.stop()
			return nil, fmt.Errorf("mail-plane up: no %s child found", name)
		}
	}
	return u, nil
}

// stop sends SIGTERM to up (which stops its children) and waits.
func (u *upRun) stop() {
	u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(2 * stopGrace):
		syscall.Kill(-u.cmd.Process.Pid, syscall.SIGKILL)
		<-u.done
	}
}

// planeServe is the plane's broker among up's children (childrenOf).
const planeServe = "mail-plane serve"

// settle lets the processes finish what the load left (GC, idle
// connections closing) before their resident size is read.
const settle = 2 * time.Second

// memory reads the resident size of up's processes, of Mailpit and of a
// null HTTP server (what any Go HTTP server costs) idle, sends
// memoryMessages 512-byte messages to each (POST /emails through up's
// writer and into the null server, 8 at a time; raw SMTP into Mailpit, 8
// sessions), reads them back once through the gateway and the inbox, and
// reads the sizes again.
func (h *harness) memory(ctx context.Context, up *upRun, mp *mailpit, null *nullServer) error {
	pids := []struct {
		name string
		pid  int
	}{
		{planeServe, up.kids[planeServe]},
		{"mail-writer", up.kids["mail-writer"]},
		{"mail-inbox", up.kids["mail-inbox"]},
		{"mail-gateway", up.kids["mail-gateway"]},
		{supervisorProc, up.cmd.Process.Pid},
		{"Mailpit (baseline)", mp.pid()},
		{"null HTTP server (Go floor)", null.pid()},
	}
	time.Sleep(settle)
	idle := make([]memory, len(pids))
	for i, p := range pids {
		m, err := memOf(p.pid)
		if err != nil {
			return err
		}
		idle[i] = m
	}
	if err := h.load(ctx, up, mp, null); err != nil {
		return err
	}
	time.Sleep(settle)
	for i, p := range pids {
		m, err := memOf(p.pid)
		if err != nil {
			return err
		}
		row := MemoryRow{Process: p.name, IdleKiB: idle[i].RSS, IdleAnonKiB: idle[i].Anon, IdleFileKiB: idle[i].File, IdlePSSKiB: idle[i].PSS,
			LoadedKiB: m.RSS, LoadedPSSKiB: m.PSS, PeakKiB: m.HWM}
		h.report.Memory = append(h.report.Memory, row)
		h.logf("  %-28s idle %6.1f MB (PSS %6.1f)  after %d messages %6.1f MB (PSS %6.1f)  peak %6.1f MB", p.name,
			mb(row.IdleKiB), mb(row.IdlePSSKiB), memoryMessages, mb(row.LoadedKiB), mb(row.LoadedPSSKiB), mb(row.PeakKiB))
	}
	return nil
}

// load sends memoryMessages into up's trial and into Mailpit, then reads
// through the gateway (a page of the list, latest) and the inbox.
func (h *harness) load(ctx context.Context, up *upRun, mp *mailpit, null *nullServer) error {
	post := emailJSON(512)
	subj, closeS := postWorkers(up.bundle.WriterURL+"/emails", up.bundle.Env["WEBSITEBENCH_MAIL_API_TOKEN"], post, 8)
	defer closeS()
	if err := count(ctx, memoryMessages, 8, subj); err != nil {
		return fmt.Errorf("POST /emails into mail-plane up: %w", err)
	}
	floor, closeF := postWorkers("http://"+null.addr+"/emails", "", post, 8)
	defer closeF()
	if err := count(ctx, memoryMessages, 8, floor); err != nil {
		return fmt.Errorf("POST /emails into the null server: %w", err)
	}
	if err := count(ctx, memoryMessages, 8, smtpWorkers(unixDialer(mp.smtp), rfc5322(512), 50)); err != nil {
		return fmt.Errorf("SMTP into Mailpit: %w", err)
	}
	api := up.bundle.APIURL + "/api/namespaces/" + up.bundle.Namespace + "/messages"
	var list struct{ Messages []json.RawMessage }
	if err := getJSON(api, up.bundle.ReadCapability, &list); err != nil || len(list.Messages) == 0 {
		return fmt.Errorf("gateway list after %d messages: %d, %v", memoryMessages, len(list.Messages), err)
	}
	var latest struct{ ID int64 }
	if err := getJSON(api+"/latest", up.bundle.ReadCapability, &latest); err != nil || latest.ID != memoryMessages {
		return fmt.Errorf("gateway latest after %d messages: id %d, %v", memoryMessages, latest.ID, err)
	}
	// The inbox's root redirects to its token page, which lists the mail.
	resp, err := probe.Get(up.bundle.InboxURL + "/")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("inbox page: HTTP %d", resp.StatusCode)
	}
	return nil
}

// count runs exactly n operations on conc workers; any failure stops it.
func count(ctx context.Context, n, conc int, mk workerFactory) error {
	s, err := newSide("", conc, mk)
	if err != nil {
		return err
	}
	defer s.close()
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	errs := make(chan error, conc)
	for _, w := range s.workers {
		go func() {
			for range next {
				if ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				if _, err := w.do(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range conc {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// mb is a size in KiB (as /proc reports it) in MB (10⁶ bytes), the unit
// of the goals.
func mb(kib int64) float64 { return float64(kib) * 1024 / 1e6 }
