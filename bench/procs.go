package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// startTimeout bounds how long any process may take to become ready.
const startTimeout = 20 * time.Second

// stopGrace is how long a process gets after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// proc is a process the harness started. Its output goes to a log file in
// the run's directory, shown when it fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// procs is every process of the run, stopped in reverse order at the end
// whatever happens.
type procs struct {
	mu   sync.Mutex
	dir  string
	list []*proc
	n    int
}

// start runs path with args (and env, when not nil), passing files as fd
// 3, 4, …; the process dies with the harness (Pdeathsig).
func (ps *procs) start(name, path string, args, env []string, files ...*os.File) (*proc, error) {
	ps.mu.Lock()
	ps.n++
	logPath := filepath.Join(ps.dir, fmt.Sprintf("%02d-%s.log", ps.n, name))
	ps.mu.Unlock()
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = env
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// stopAll stops every process still running, newest first.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// stop sends SIGTERM, then SIGKILL to the group after stopGrace.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// failed explains a process that did not come up: its last lines.
func (p *proc) failed(what string) error {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return fmt.Errorf("%s %s; its last output (%s):\n%s", p.name, what, p.log, strings.Join(lines, "\n"))
}

// poll calls ready every few milliseconds until it answers true, p exits
// or the start timeout passes.
func (p *proc) poll(ctx context.Context, ready func() bool) error {
	deadline := time.Now().Add(startTimeout)
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.done:
			return p.failed("exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return p.failed("was not ready within " + startTimeout.String())
		}
	}
}

// memory is a process's size from /proc/PID/status and smaps_rollup, in
// KiB. Anon is the process's own memory (heap, stacks); File is pages of
// files it maps, mostly its binary's code and data, which the page cache
// holds once for every process that maps the same file; PSS divides those
// shared pages among the processes that map them (see rollup).
type memory struct {
	RSS  int64 `json:"rss_kib"`
	HWM  int64 `json:"peak_rss_kib"`
	Anon int64 `json:"rss_anon_kib"`
	File int64 `json:"rss_file_kib"`
	PSS  int64 `json:"pss_kib"`
}

func memOf(pid int) (memory, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n
		case "VmHWM":
			m.HWM = n
		case "RssAnon":
			m.Anon = n
		case "RssFile":
			m.File = n
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return m, err
	}
	r, err := parseRollup(string(b))
	if err != nil {
		return m, fmt.Errorf("pid %d: %w", pid, err)
	}
	m.PSS = r.PSS
	return m, nil
}

// childrenOf lists the processes whose parent is pid (mail-plane up's
// children) by their command name, and a mail-plane child by its command
// name and subcommand ("mail-plane serve", "mail-plane hooks"): up runs
// more than one, and a name alone would pick one of them at random.
func childrenOf(pid int) (map[string]int, error) {
	procs, err := allProcs()
	if err != nil {
		return nil, err
	}
	kids := map[string]int{}
	for child, p := range procs {
		if p.ppid != pid {
			continue
		}
		name := p.comm
		if name == "mail-plane" {
			argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
			if err != nil {
				continue // gone since allProcs read it
			}
			for _, arg := range strings.Split(string(argv), "\x00")[1:] {
				if arg == "serve" || arg == "hooks" { // after up's global flags
					name += " " + arg
					break
				}
			}
		}
		kids[name] = child
	}
	return kids, nil
}

// tcpListener opens a listener on a free loopback port and its file, to be
// handed to a child as fd:N (as mail-plane up does), so no port is raced.
// freeAddr is a loopback TCP address free a moment ago, for a process
// that binds its own ports (the peer Mailpit): another process could take
// it first, which fails that start plainly.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func tcpListener() (net.Listener, *os.File, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, f, nil
}

// writeSecret writes a secret into a new 0600 file in dir.
func writeSecret(dir, name, secret string) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(secret+"\n"), 0o600)
}

// logArgs keep every binary at the level a production deployment logs at,
// so that the run measures mailplane, not its debug log.
var logArgs = []string{"--log-level", "warn"}

// plane is a running mail-plane serve.
type plane struct {
	*proc
	socket string
	data   string
	admin  *rpc.Client
}

// startPlane runs mail-plane serve with quotas off on a fresh directory,
// with extra flags, and waits until it answers health with its store up.
func (h *harness) startPlane(ctx context.Context, name string, extra ...string) (*plane, error) {
	dir, err := os.MkdirTemp(h.procs.dir, "p")
	if err != nil {
		return nil, err
	}
	pl := &plane{socket: filepath.Join(dir, "plane.sock"), data: filepath.Join(dir, "data")}
	args := append(h.globalArgs(name), "serve", "--socket", pl.socket, "--data", pl.data,
		"--quota-messages", "0", "--quota-bytes", "0")
	if pl.proc, err = h.procs.start(name, h.bin("mail-plane"), append(args, extra...), nil); err != nil {
		return nil, err
	}
	err = pl.poll(ctx, func() bool {
		g, err := rpc.ReadSecretFile(filepath.Join(pl.data, "admin.grant"))
		if err != nil {
			return false
		}
		c := rpc.NewClient(pl.socket, g)
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if r, err := c.Health(hctx); err != nil || r.Store != "ok" {
			c.Close()
			return false
		}
		pl.admin = c
		return true
	})
	return pl, err
}

// trial creates a candidate trial and writes its parts for the surfaces.
func (pl *plane) trial(ctx context.Context) (rpc.Identity, error) {
	return pl.admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
}

// surface is a running mail-writer, mail-inbox or mail-gateway.
type surface struct {
	*proc
	url      string // http://127.0.0.1:PORT
	smtpAddr string // mail-writer only
}

// writerConnections lifts mail-writer's per-listener connection limit
// (default 16, the reference's) above the largest concurrency measured.
const writerConnections = "256"

// startSurface runs a surface with its grant (and, for the inbox, token)
// on fresh loopback listeners and waits until GET /healthz answers 200.
func (h *harness) startSurface(ctx context.Context, name string, pl *plane, grant, token string) (*surface, error) {
	dir, err := os.MkdirTemp(h.procs.dir, "s")
	if err != nil {
		return nil, err
	}
	grantFile, err := writeSecret(dir, "grant", grant)
	if err != nil {
		return nil, err
	}
	nls := 1
	if name == "mail-writer" {
		nls = 2
	}
	var files []*os.File
	var addrs []string
	for range nls {
		ln, f, err := tcpListener()
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, ln.Addr().String())
		defer ln.Close()
		defer f.Close()
		files = append(files, f)
	}
	args := append(h.globalArgs(name), "--plane-socket", pl.socket, "--grant-file", grantFile)
	switch name {
	case "mail-writer":
		args = append(args, "--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", "fixed", "--max-connections", writerConnections)
	case "mail-inbox":
		tokenFile, err := writeSecret(dir, "token", token)
		if err != nil {
			return nil, err
		}
		args = append(args, "--token-file", tokenFile, "--listen", "fd:3")
	default:
		args = append(args, "--listen", "fd:3")
	}
	p, err := h.procs.start(name, h.bin(name), args, nil, files...)
	if err != nil {
		return nil, err
	}
	s := &surface{proc: p, url: "http://" + addrs[0]}
	if nls == 2 {
		s.smtpAddr = addrs[1]
	}
	return s, p.poll(ctx, func() bool { return healthy(s.url + "/healthz") })
}

var probe = &http.Client{Timeout: time.Second}

func healthy(url string) bool {
	resp, err := probe.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// mailpit is a running Mailpit on Unix sockets in a fresh directory.
type mailpit struct {
	*proc
	http, smtp string
	// httpAddr and smtpAddr are the loopback TCP addresses of a peer
	// (startPeer), instead of the sockets.
	httpAddr, smtpAddr string
}

// startMailpit runs Mailpit with the settings the plane gives its own
// (Unix sockets only, no message cap, 2 MB messages, nothing outbound)
// and waits for /readyz.
func (h *harness) startMailpit(ctx context.Context, name string) (*mailpit, error) {
	return h.runMailpit(ctx, name, false)
}

// startPeer runs Mailpit as a user who picked it instead of mailplane
// would: its HTTP API and SMTP on loopback TCP ports, its own SQLite file,
// the same settings otherwise.
func (h *harness) startPeer(ctx context.Context, name string) (*mailpit, error) {
	return h.runMailpit(ctx, name, true)
}

func (h *harness) runMailpit(ctx context.Context, name string, tcp bool) (*mailpit, error) {
	if h.mailpitPath == "" {
		return nil, errors.New("no Mailpit binary (-mailpit, $MAILPLANE_MAILPIT or .cache/bin/mailpit; make deps builds it)")
	}
	dir, err := os.MkdirTemp(h.procs.dir, "m")
	if err != nil {
		return nil, err
	}
	m := &mailpit{http: filepath.Join(dir, "http.sock"), smtp: filepath.Join(dir, "smtp.sock")}
	uiBind, smtpBind := "unix:"+m.http+":660", "unix:"+m.smtp+":660"
	if tcp {
		if m.httpAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		if m.smtpAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		uiBind, smtpBind = m.httpAddr, m.smtpAddr
	}
	env := []string{
		"MP_UI_BIND_ADDR=" + uiBind,
		"MP_SMTP_BIND_ADDR=" + smtpBind,
		"MP_DATABASE=" + filepath.Join(dir, "mailpit.db"),
		"MP_MAX_MESSAGES=0",
		"MP_MAX_MESSAGE_SIZE=2",
		"MP_SMTP_MAX_RECIPIENTS=16",
		"MP_DISABLE_VERSION_CHECK=true",
		"MP_ENABLE_CHAOS=false",
		"MP_ENABLE_PROMETHEUS=false",
		"MP_WEBHOOK_URL=",
	}
	if m.proc, err = h.procs.start(name, h.mailpitPath, nil, env); err != nil {
		return nil, err
	}
	hc, base := unixHTTPClient(m.http, 1), "http://mailpit"
	if tcp {
		hc, base = httpClient(1), "http://"+m.httpAddr
	}
	defer hc.CloseIdleConnections()
	return m, m.poll(ctx, func() bool {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// rollup is a process's size from /proc/PID/smaps_rollup, in KiB. PSS
// divides each shared page among the processes that map it, so the PSS
// of a process tree sums to what the tree costs the machine; its file-
// backed part (the binaries' pages) also shrinks when any other process
// maps the same binary, so PssAnon (heap, stacks) is the steadier figure
// of what a process holds for its work.
type rollup struct {
	RSS, PSS, PSSAnon int64
}

// parseRollup reads Rss, Pss and Pss_Anon from smaps_rollup's text;
// Pss_Anon is 0 on kernels older than 5.9, which lack it.
func parseRollup(s string) (rollup, error) {
	var r rollup
	seen := 0
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(line, ":")
		var dst *int64
		switch k {
		case "Rss":
			dst = &r.RSS
		case "Pss":
			dst = &r.PSS
		case "Pss_Anon":
			dst = &r.PSSAnon
		}
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return rollup{}, fmt.Errorf("smaps_rollup: unexpected %q", strings.TrimSpace(line))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return rollup{}, fmt.Errorf("smaps_rollup: %q: %w", strings.TrimSpace(line), err)
		}
		*dst = n
		if k != "Pss_Anon" {
			seen++
		}
	}
	if seen != 2 {
		return rollup{}, fmt.Errorf("smaps_rollup: no Rss and Pss lines")
	}
	return r, nil
}

// procInfo is a process as /proc/PID/stat names it.
type procInfo struct {
	comm string
	ppid int
}

// allProcs reads every living process's command name and parent.
func allProcs() (map[int]procInfo, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]procInfo{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(string(b)); ok {
			out[pid] = p
		}
	}
	return out, nil
}

// parseStat reads the command name and parent of /proc/PID/stat's line;
// a zombie is not a living process.
func parseStat(s string) (procInfo, bool) {
	// pid (comm) state ppid …; comm may hold spaces and parentheses, so
	// cut at the last ')'.
	i := strings.LastIndexByte(s, ')')
	j := strings.IndexByte(s, '(')
	if i < 0 || j < 0 || j > i {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || f[0] == "Z" {
		return procInfo{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procInfo{}, false
	}
	return procInfo{comm: s[j+1 : i], ppid: ppid}, true
}

// treeOf is root and every descendant of it, root first, then in pid
// order within each generation.
func treeOf(procs map[int]procInfo, root int) []int {
	if _, ok := procs[root]; !ok {
		return nil
	}
	kids := map[int][]int{}
	for pid, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		k := kids[out[i]]
		slices.Sort(k)
		out = append(out, k...)
	}
	return out
}

// stackSnapshot is the size of root's whole tree (mail-plane up and every
// process under it): PSS and RSS summed, processes, threads.
func stackSnapshot(root int, when string, live int) (StackLevel, error) {
	procs, err := allProcs()
	if err != nil {
		return StackLevel{}, err
	}
	tree := treeOf(procs, root)
	if len(tree) == 0 {
		return StackLevel{}, fmt.Errorf("process %d is gone", root)
	}
	s := StackLevel{When: when, LiveTrials: live}
	for i, pid := range tree {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			return s, err
		}
		m, err := parseRollup(string(b))
		if err != nil {
			return s, fmt.Errorf("pid %d: %w", pid, err)
		}
		name := procs[pid].comm
		switch {
		case i == 0:
			name += " up"
		case name == "mail-plane":
			name += " serve"
		}
		p := ProcMem{Process: name, PID: pid, PSSKiB: m.PSS, PSSAnonKiB: m.PSSAnon, RSSKiB: m.RSS, Threads: threadsOf(pid)}
		s.PerProcess = append(s.PerProcess, p)
		s.PSSKiB += m.PSS
		s.PSSAnonKiB += m.PSSAnon
		s.RSSKiB += m.RSS
		s.Threads += p.Threads
	}
	s.Processes = len(tree)
	return s, nil
}

// threadsOf is a process's thread count (0 if it is gone).
func threadsOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// diskUsage is what du reports for dir: the blocks allocated to every
// file under it, each inode once, in KiB.
func diskUsage(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var blocks int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (a journal)
			}
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			blocks += st.Blocks
		}
		return nil
	})
	return blocks * 512 / 1024, err
}

// trialWriter opens a trial on pl and starts its writer, the door every
// ingest figure goes through.
func (h *harness) trialWriter(ctx context.Context, pl *plane) (*surface, rpc.Identity, error) {
	id, err := pl.trial(ctx)
	if err != nil {
		return nil, id, err
	}
	w, err := h.startSurface(ctx, "mail-writer", pl, id.WriterGrant, "")
	return w, id, err
}

// cpuTime is the CPU time (user and system, utime+stime of /proc/PID/stat,
// in clock ticks of 10 ms) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseCPU(string(b))
}

// parseCPU reads utime and stime from a /proc/PID/stat line.
func parseCPU(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/PID/stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/PID/stat: utime %q, stime %q", f[11], f[12])
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}
