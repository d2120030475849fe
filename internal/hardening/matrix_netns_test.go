package hardening

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The isolation matrix's netns cells: two candidate trials on one `up`
// stack, each opened with a network namespace of its own, whose doors up
// binds inside it. A candidate is a process inside its namespace with an
// unprivileged uid (65534), as a harness runs one. Cells:
//   - kernel: from each namespace, a connection to every door of both
//     trials, to every listener of the stack and to the plane's socket;
//     only the candidate's own three doors answer;
//   - doors: from inside, POST /emails on its HTTP door with each
//     credential, plain SMTP (no AUTH) on its SMTP and implicit-TLS doors,
//     and AUTH with the other trial's token; each permitted send lands
//     where its credential (or, without one, the door) says, and nowhere
//     else;
//   - rpc: send and report naming a door key, with each grant: only the
//     shared writer's opens it, and only into the key's trial.

// netnsProbe is the candidate's process: it runs each step and prints the
// outcomes as a JSON list (an errno name, "connected", an HTTP status, an
// SMTP code).
const netnsProbe = `
import errno, json, smtplib, socket, ssl, sys, urllib.error, urllib.request
steps = json.loads(sys.argv[1])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def run(s):
    try:
        if s["op"] == "dial":
            socket.create_connection((s["host"], s["port"]), timeout=5).close()
            return "connected"
        if s["op"] == "unix":
            u = socket.socket(socket.AF_UNIX)
            try:
                u.connect(s["path"])
            finally:
                u.close()
            return "connected"
        if s["op"] == "post":
            body = json.dumps({"from": s["from"], "to": "cell@example.com", "subject": s["subject"], "text": "x"}).encode()
            h = {"Content-Type": "application/json"}
            if s.get("token"):
                h["Authorization"] = "Bearer " + s["token"]
            try:
                with opener.open(urllib.request.Request(s["url"], data=body, headers=h, method="POST"), timeout=20) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        if s["op"] == "smtp":
            msg = "Subject: %s\r\n\r\nx\r\n" % s["subject"]
            if s.get("cadata"):
                c = smtplib.SMTP_SSL(s["host"], s["port"], timeout=20, context=ssl.create_default_context(cadata=s["cadata"]))
            else:
                c = smtplib.SMTP(s["host"], s["port"], timeout=20)
            with c:
                if s.get("password"):
                    c.login("resend", s["password"])
                c.sendmail(s["from"], ["cell@example.com"], msg)
            return 250
    except smtplib.SMTPResponseException as e:
        return e.smtp_code
    except smtplib.SMTPRecipientsRefused as e:
        return list(e.recipients.values())[0][0]
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, repr(e))
    return "unknown step"
print(json.dumps([run(s) for s in steps]))
`

// netnsCell is one step a candidate runs and what it should come to.
type netnsCell struct {
	name string
	step map[string]any
	ok   func(any) bool
	dest int // the trial a permitted send lands in; -1: none
}

// TestIsolationMatrixNetns runs the netns cells.
func TestIsolationMatrixNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ip, setpriv, python := itest.Require(t, "ip"), itest.Require(t, "setpriv"), itest.Require(t, "/usr/bin/python3")
	up := newUpSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	s := up.sys
	w := &world{byPart: map[string]int{}, expected: [2]map[string]bool{{}, {}}, hc: httpClient(4)}
	w.sys = s
	start := time.Now()
	var names [2]string
	var bs [2]rpc.Bundle
	for i := range bs {
		names[i], _ = itest.Netns(t, "mx"+trialName(i))
		b, err := s.plane.admin.TrialOpen(ctxT(t, time.Minute), &rpc.TrialOpenRequest{Netns: "/run/netns/" + names[i]})
		if err != nil {
			t.Fatalf("trial.open with netns: %v", err)
		}
		bs[i] = b
		s.secret(trialName(i)+"'s mail-API token", b.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"])
		s.secret(trialName(i)+"'s bootstrap token", b.CandidateEnvironment["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
		s.secret(trialName(i)+"'s read capability", b.ReadCapability)
	}
	ca, err := os.ReadFile(bs[0].CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		cells := netnsCells(t, up, bs, i, string(ca))
		steps := make([]map[string]any, len(cells))
		for n, c := range cells {
			steps[n] = c.step
		}
		arg, _ := json.Marshal(steps)
		cmd := exec.Command(ip, "netns", "exec", names[i], setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
			python, "-c", netnsProbe, string(arg))
		cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin"}, "/"
		out, err := cmd.Output()
		var got []any
		if err != nil || json.Unmarshal(out, &got) != nil || len(got) != len(cells) {
			t.Fatalf("candidate %s: %v\n%s", trialName(i), err, out)
		}
		for n, c := range cells {
			ok := c.ok(got[n])
			part, name, _ := strings.Cut(c.name, ": ")
			w.cell(part, fmt.Sprintf("from %s's namespace, %s", trialName(i), name), c.dest >= 0 || c.dest == -2, ok, fmt.Sprint(got[n]))
			if ok && c.dest >= 0 {
				w.sent(c.step["subject"].(string), c.dest)
			}
		}
	}
	netnsRPCCells(t, w, up, bs)
	for i, b := range bs {
		code, subjects := readSubjects(t, w, b)
		want := slices.Sorted(func(yield func(string) bool) {
			for k := range w.expected[i] {
				if !yield(k) {
					return
				}
			}
		})
		slices.Sort(subjects)
		if code != http.StatusOK || strings.Join(subjects, "|") != strings.Join(want, "|") {
			t.Errorf("trial %s holds %d %q, want %q", trialName(i), code, subjects, want)
		}
	}
	figure(t, "isolation-matrix-netns cells=%d permitted=%d kernel=%d doors=%d rpc=%d took=%v",
		w.cells, w.allowed, w.byPart["kernel"], w.byPart["doors"], w.byPart["rpc"], time.Since(start).Round(time.Millisecond))
}

// netnsCells are candidate i's steps. A kernel cell's dest is -2 where the
// connection is permitted (its own doors), -1 where it must fail.
func netnsCells(t *testing.T, up *upSys, bs [2]rpc.Bundle, i int, ca string) []netnsCell {
	me, other := bs[i], bs[1-i]
	own := itest.DoorPorts(t, me)
	refused := func(v any) bool { return v == "ECONNREFUSED" || v == "ENETUNREACH" || v == "EACCES" }
	var cells []netnsCell
	dial := func(what, host string, port int) {
		if host == rpc.NetnsDoorHost && slices.Contains(own, port) && !strings.HasPrefix(what, "its own") {
			return // the same number inside its own namespace is its own door
		}
		c := netnsCell{name: "kernel: " + what, step: map[string]any{"op": "dial", "host": host, "port": port}, dest: -1,
			ok: func(v any) bool { return v == "connected" }}
		if strings.HasPrefix(what, "its own") {
			c.dest = -2
		}
		cells = append(cells, c)
	}
	for n, p := range own {
		dial(fmt.Sprintf("its own door %d", n), rpc.NetnsDoorHost, p)
	}
	for n, p := range itest.DoorPorts(t, other) {
		dial(fmt.Sprintf("%s's door %d", trialName(1-i), n), rpc.NetnsDoorHost, p)
	}
	stack := map[string]string{"the gateway": up.bundle.APIURL, "the shared writer": up.bundle.WriterURL, "the inbox": up.bundle.InboxBaseURL,
		"the HTTPS writer": me.WriterHTTPSURL}
	for what, u := range stack {
		if u != "" {
			dial(what, "127.0.0.1", itest.URLPort(t, u))
		}
	}
	dial("the shared SMTP port", "127.0.0.1", up.bundle.SharedSMTPPort)
	cells = append(cells, netnsCell{name: "kernel: the plane's socket", step: map[string]any{"op": "unix", "path": up.bundle.PlaneSocket}, dest: -1,
		ok: func(v any) bool { return v == "connected" }})
	for n := range cells {
		if cells[n].dest == -1 {
			ok := cells[n].ok
			cells[n].ok = func(v any) bool { return ok(v) || !refused(v) } // anything but a refusal counts as reached
		}
	}

	env := me.CandidateEnvironment
	subject := func(what string) string { return fmt.Sprintf("netns %s %s", trialName(i), what) }
	post := func(what, token string, dest int) {
		cells = append(cells, netnsCell{name: "doors: POST /emails " + what, dest: dest,
			step: map[string]any{"op": "post", "url": env["WEBSITEBENCH_MAIL_API_URL"], "token": token, "from": rpc.CandidateSender, "subject": subject(what)},
			ok:   func(v any) bool { return v == float64(200) }})
	}
	post("with its token", env["WEBSITEBENCH_MAIL_API_TOKEN"], i)
	post("with the other's token", other.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"], 1-i)
	post("without a token", "", -1)
	post("with its read capability", me.ReadCapability, -1)
	post("with its bootstrap token", env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"], -1) // reads its coordinates; never writes
	smtpCell := func(what string, port int, cadata, password string, dest int) {
		cells = append(cells, netnsCell{name: "doors: SMTP " + what, dest: dest,
			step: map[string]any{"op": "smtp", "host": rpc.NetnsDoorHost, "port": port, "cadata": cadata, "password": password,
				"from": rpc.CandidateSender, "subject": subject(what)},
			ok: func(v any) bool { return v == float64(250) }})
	}
	smtpCell("plain, no AUTH", me.SMTPPort, "", "", i)
	smtpCell("implicit TLS, no AUTH", me.SMTPTLSPort, ca, "", i)
	smtpCell("AUTH with the other's token", me.SMTPPort, "", other.CandidateEnvironment["WEBSITEBENCH_MAIL_API_TOKEN"], 1-i)
	return cells
}

// netnsRPCCells: send and report naming a door's key, with each grant.
func netnsRPCCells(t *testing.T, w *world, up *upSys, bs [2]rpc.Bundle) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(up.bundle.DataDir, "plane", "mailplane.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys [2]string
	for i, b := range bs {
		err := db.QueryRow(`SELECT d.door FROM netns_doors d JOIN namespaces n ON n.trial_id = d.trial_id WHERE n.name = ?`, b.Namespace).Scan(&keys[i])
		if err != nil {
			t.Fatalf("the door key of %s: %v", trialName(i), err)
		}
	}
	grants := map[string]struct{ principal, grant string }{
		"shared writer grant": {principalOf(rpc.RoleWriter, true), w.sharedGrant(filepath.Dir(up.bundle.AdminGrantFile), rpc.RoleWriter)},
		"shared inbox grant":  {principalOf(rpc.RoleInbox, true), w.sharedGrant(filepath.Dir(up.bundle.AdminGrantFile), rpc.RoleInbox)},
		"gateway grant":       {principalOf(rpc.RoleGateway, false), w.plane.gatewayGrant},
		"admin grant":         {principalOf(rpc.RoleAdmin, false), w.plane.adminGrant},
		"no grant":            {},
	}
	// A door's key selects its trial: it opens a call the table binds to
	// the credential presented, on a method whose row accepts a door.
	authz, accepts := policy(t), accepted(t)
	opensDoor := func(method, principal string) bool {
		return authz[method][principal] == "credential" && slices.Contains(accepts[method], "netns")
	}
	ctx := ctxT(t, time.Minute)
	for gname, gr := range grants {
		g := gr.grant
		c := rpc.NewClient(up.bundle.PlaneSocket, g)
		for k, key := range append(keys[:], "an unknown key") {
			subject := fmt.Sprintf("rpc door %d by %s", k, gname)
			_, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, Door: key, From: rpc.CandidateSender, To: []string{"cell@example.com"},
				Raw: []byte("Subject: " + subject + "\r\n\r\nx\r\n")})
			want := opensDoor(rpc.MethodSend, gr.principal) && k < 2
			if err != nil && rpc.IsOutage(err) {
				t.Errorf("send naming door %d with the %s: an outage (%v), want a refusal", k, gname, err)
			}
			w.cell("rpc", "send naming door "+strconv.Itoa(k)+" with the "+gname, want, err == nil, fmt.Sprint(err))
			if err == nil && want {
				w.sent(subject, k)
			}
			err = c.Report(ctx, &rpc.ReportRequest{Door: key, Code: "connection_limit", Count: 1})
			want = opensDoor(rpc.MethodReport, gr.principal) && k < 2
			w.cell("rpc", "report naming door "+strconv.Itoa(k)+" with the "+gname, want, err == nil, fmt.Sprint(err))
		}
		c.Close()
	}
}

// readSubjects is what the gateway answers for b's trial.
func readSubjects(t *testing.T, w *world, b rpc.Bundle) (int, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.APIURL+"/api/namespaces/"+b.Namespace+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+b.ReadCapability)
	resp, err := w.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Messages []struct{ Subject string } `json:"messages"`
	}
	json.NewDecoder(resp.Body).Decode(&l)
	out := []string{}
	for _, m := range l.Messages {
		out = append(out, m.Subject)
	}
	return resp.StatusCode, out
}
