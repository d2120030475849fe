// Command probe is the e2e test's hands inside the container deployment:
// it runs in a FROM-scratch image on one zone's network, or as one zone's
// user with that zone's volumes, and reports what it could reach, read and
// call as one JSON document on stdout. It asserts nothing itself; the test
// (build/e2e) decides what each answer must be.
//
// Secrets it needs (tokens, grants) arrive on stdin, never in argv or the
// environment, so `docker inspect` and the process table do not show them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/resend/resend-go/v3"

	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of a probe: every network step is bounded, so a hung surface fails
// the test instead of stalling it.
const (
	dialTimeout = 1500 * time.Millisecond
	httpTimeout = 20 * time.Second
	maxBody     = 1 << 20
)

var commands = map[string]func(args []string) (any, error){
	"dial":      dial,
	"netns":     netns,
	"stat":      stat,
	"cat":       cat,
	"rpc":       rpcCall,
	"wait-http": waitHTTP,
	"candidate": candidate,
	"agent":     agent,
	"evaluator": evaluator,
	"operator":  operator,
	"pg":        pgLogin,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: probe dial|netns|stat|cat|rpc|wait-http|candidate|agent|evaluator|operator|pg ARGS...")
		os.Exit(2)
	}
	out, err := commands[os.Args[1]](os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
}

// dial tries a TCP connection to each HOST:PORT and says what happened:
// "open", "refused", "timeout" (dropped on the way), "unresolved" (no such
// name on this network) or the error.
func dial(addrs []string) (any, error) {
	type result struct {
		addr, state string
	}
	ch := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			c, err := net.DialTimeout("tcp", a, dialTimeout)
			if err == nil {
				c.Close()
				ch <- result{a, "open"}
				return
			}
			var dnsErr *net.DNSError
			switch {
			case errors.As(err, &dnsErr):
				ch <- result{a, "unresolved"}
			case errors.Is(err, syscall.ECONNREFUSED):
				ch <- result{a, "refused"}
			case errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
				ch <- result{a, "timeout"}
			case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
				ch <- result{a, "unreachable"}
			default:
				ch <- result{a, err.Error()}
			}
		}()
	}
	out := map[string]string{}
	for range addrs {
		r := <-ch
		out[r.addr] = r.state
	}
	return out, nil
}

// netns describes the network namespace the probe runs in: its interfaces
// and every listening TCP or bound UDP socket in it (/proc/self/net is per
// namespace).
func netns([]string) (any, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	var listening []string
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile("/proc/self/net/" + f)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			// st 0A is TCP_LISTEN. A UDP socket receives from anyone
			// only while unconnected (st 07); a connected one (st 01,
			// such as a DNS lookup's in flight) hears its peer alone.
			if len(fields) > 3 && (strings.HasPrefix(f, "udp") && fields[3] == "07" || fields[3] == "0A") {
				listening = append(listening, f+" "+fields[1])
			}
		}
	}
	return map[string]any{"interfaces": names, "listening": listening}, nil
}

// stat reports each path's owner, mode, and whether this process can read
// it.
func stat(paths []string) (any, error) {
	out := map[string]map[string]any{}
	for _, p := range paths {
		r := map[string]any{}
		if fi, err := os.Stat(p); err != nil {
			r["error"] = err.Error()
		} else {
			st := fi.Sys().(*syscall.Stat_t)
			r["uid"], r["gid"], r["mode"] = st.Uid, st.Gid, fmt.Sprintf("%#o", st.Mode&0o7777)
		}
		if f, err := os.Open(p); err == nil {
			r["readable"] = true
			f.Close()
		} else {
			r["readable"] = false
		}
		out[p] = r
	}
	return out, nil
}

// cat returns a file's content: a zone's secret, as a compromised surface
// would carry it off.
func cat(args []string) (any, error) {
	if len(args) != 1 {
		return nil, errors.New("want one FILE")
	}
	s, err := rpc.ReadSecretFile(args[0])
	if err != nil {
		return nil, err
	}
	return map[string]string{"content": s}, nil
}

// rpcCall calls the plane at SOCKET once per grant read from stdin (one
// JSON object: {"NAME": "grant", ...}) and reports each answer's code, ""
// when the call succeeded.
//
//	probe rpc SOCKET METHOD
func rpcCall(args []string) (any, error) {
	if len(args) != 2 {
		return nil, errors.New("want SOCKET METHOD")
	}
	socket, method := args[0], args[1]
	var grants map[string]string
	if err := json.NewDecoder(io.LimitReader(os.Stdin, maxBody)).Decode(&grants); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	out := map[string]map[string]string{}
	for name, g := range grants {
		c := rpc.NewClient(socket, g)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		switch method {
		case rpc.MethodHealth:
			_, err = c.Health(ctx)
		case rpc.MethodList:
			_, err = c.List(ctx, &rpc.ReadRequest{})
		case rpc.MethodSend:
			_, err = c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"probe@example.com"},
				Raw: []byte("From: " + rpc.CandidateSender + "\r\nTo: probe@example.com\r\nSubject: probe\r\n\r\nprobe\r\n")})
		default:
			err = fmt.Errorf("method %q: want health, list or send", method)
		}
		cancel()
		c.Close()
		r := map[string]string{"code": rpc.CodeOf(err)}
		var e *rpc.Error
		if errors.As(err, &e) {
			r["message"] = e.Message
		}
		out[name] = r
	}
	return out, nil
}

// waitHTTP waits until GET URL answers 200, for up to a minute.
func waitHTTP(args []string) (any, error) {
	if len(args) != 1 {
		return nil, errors.New("want URL")
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := hc.Get(args[0])
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return map[string]int{"status": resp.StatusCode}, nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s: not 200 within a minute (last: %s)", args[0], last)
}

// candidateInput is what the website under test is handed: the candidate
// environment (docs/reference.md §9.1) with container host names, and what to
// send.
type candidateInput struct {
	Env      map[string]string `json:"env"`
	To       string            `json:"to"`
	APICode  string            `json:"api_code"`
	SMTPTo   string            `json:"smtp_to"`
	SMTPCode string            `json:"smtp_code"`
}

// candidate does what a candidate website does with its mail environment:
// it asks the bootstrap route for its coordinates, sends one message with
// the official Resend Go SDK and one over SMTP to the advertised host and
// port.
func candidate([]string) (any, error) {
	var in candidateInput
	if err := json.NewDecoder(io.LimitReader(os.Stdin, maxBody)).Decode(&in); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	out := map[string]any{}
	hc := &http.Client{Timeout: httpTimeout}

	req, err := http.NewRequest(http.MethodGet, in.Env[wbenv.MailboxBootstrapURL], nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+in.Env[wbenv.MailboxBootstrapToken])
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	var boot struct {
		Namespace  string `json:"namespace"`
		SMTPHost   string `json:"smtp_host"`
		SMTPPort   int    `json:"smtp_port"`
		Capability string `json:"capability"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&boot)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		return nil, fmt.Errorf("bootstrap: %s (%v)", resp.Status, err)
	}
	out["bootstrap"] = map[string]any{"namespace": boot.Namespace, "smtp_host": boot.SMTPHost, "smtp_port": boot.SMTPPort,
		"has_capability": boot.Capability != ""}

	// The SDK appends "emails" to its base URL.
	base, err := url.Parse(strings.TrimSuffix(in.Env[wbenv.MailAPIURL], "emails"))
	if err != nil {
		return nil, err
	}
	client := resend.NewCustomClient(hc, in.Env[wbenv.MailAPIToken])
	client.BaseURL = base
	sent, err := client.Emails.Send(&resend.SendEmailRequest{
		From:    in.Env[wbenv.MailFrom],
		To:      []string{in.To},
		Subject: "Confirm your account",
		Text:    "Welcome! Your verification code is " + in.APICode + ".",
	})
	if err != nil {
		return nil, fmt.Errorf("resend: %w", err)
	}
	out["resend_id"] = sent.Id

	addr := net.JoinHostPort(boot.SMTPHost, fmt.Sprint(boot.SMTPPort))
	from := in.Env[wbenv.SMTPFrom]
	msg := "From: " + from + "\r\nTo: " + in.SMTPTo + "\r\nSubject: Your sign-in code\r\n\r\nYour sign-in code is " + in.SMTPCode + ".\r\n"
	if err := sendSMTP(addr, from, in.SMTPTo, msg); err != nil {
		return nil, fmt.Errorf("smtp %s: %w", addr, err)
	}
	out["smtp"] = "sent"
	return out, nil
}

// sendSMTP is smtp.SendMail with a deadline on the whole session.
func sendSMTP(addr, from, to, msg string) error {
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(httpTimeout))
	host, _, _ := net.SplitHostPort(addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

var messageLink = regexp.MustCompile(`href="(/inbox/[^"]+/messages/[0-9]+)"`)

// agent does what the agent's browser does: opens the inbox URL it was
// given (no credential; the root redirects to the mailbox), then every
// message the inbox links to. It reports the pages' status and HTML.
//
//	probe agent URL WANT
func agent(args []string) (any, error) {
	var want int
	if len(args) != 2 {
		return nil, errors.New("want URL WANT")
	}
	if _, err := fmt.Sscan(args[1], &want); err != nil {
		return nil, fmt.Errorf("WANT %q: %w", args[1], err)
	}
	hc := &http.Client{Timeout: httpTimeout}
	page := func(u string) (map[string]any, error) {
		resp, err := hc.Get(u)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			return nil, err
		}
		return map[string]any{"status": resp.StatusCode, "content_type": resp.Header.Get("Content-Type"),
			"path": resp.Request.URL.Path, "html": string(b)}, nil
	}
	// The inbox may be asked before the last message lands: look again a
	// few times until it links to as many messages as the test expects.
	var inbox map[string]any
	var links [][]string
	for i := 0; i < 50; i++ {
		var err error
		if inbox, err = page(args[0]); err != nil {
			return nil, err
		}
		links = messageLink.FindAllStringSubmatch(inbox["html"].(string), -1)
		if len(links) >= want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	base, err := url.Parse(args[0])
	if err != nil {
		return nil, err
	}
	var messages []map[string]any
	for _, l := range links {
		m, err := page(base.ResolveReference(&url.URL{Path: l[1]}).String())
		if err != nil {
			return nil, err
		}
		messages = append(messages, m)
	}
	return map[string]any{"inbox": inbox, "messages": messages}, nil
}

// evaluatorInput names the evaluator's namespace and read capability.
type evaluatorInput struct {
	URL        string `json:"url"`
	Namespace  string `json:"namespace"`
	Capability string `json:"capability"`
	Want       int    `json:"want"`
}

// evaluator does what the evaluator does: it reads the trial's messages
// from the gateway's JSON API with its read capability, waiting until Want
// have arrived, then asks for the latest one, and once with a wrong
// capability.
func evaluator([]string) (any, error) {
	var in evaluatorInput
	if err := json.NewDecoder(bufio.NewReader(io.LimitReader(os.Stdin, maxBody))).Decode(&in); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	hc := &http.Client{Timeout: httpTimeout}
	get := func(path, capability string) (int, json.RawMessage, error) {
		req, err := http.NewRequest(http.MethodGet, in.URL+path, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+capability)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		return resp.StatusCode, b, err
	}
	prefix := "/api/namespaces/" + url.PathEscape(in.Namespace) + "/messages"
	var list struct {
		Messages []json.RawMessage `json:"messages"`
	}
	var status int
	var body json.RawMessage
	for i := 0; i < 50; i++ {
		var err error
		if status, body, err = get(prefix, in.Capability); err != nil {
			return nil, err
		}
		list.Messages = nil
		if status == http.StatusOK && json.Unmarshal(body, &list) == nil && len(list.Messages) >= in.Want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	latestStatus, latest, err := get(prefix+"/latest", in.Capability)
	if err != nil {
		return nil, err
	}
	wrongStatus, wrong, err := get(prefix, strings.Repeat("0", 64))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"list":   map[string]any{"status": status, "body": body},
		"latest": map[string]any{"status": latestStatus, "body": latest},
		"wrong":  map[string]any{"status": wrongStatus, "body": wrong},
	}, nil
}

// operatorInput is what the operator's browser or Prometheus holds: the
// console's address and the plane's admin grant.
type operatorInput struct {
	URL       string `json:"url"`
	Grant     string `json:"grant"`
	Namespace string `json:"namespace"`
}

// operator does what the operator does with the console: it asks for the
// trials page without a credential, then for the trials page, the trial's
// page and /metrics with the admin grant, and reports each status and
// body.
func operator([]string) (any, error) {
	var in operatorInput
	if err := json.NewDecoder(bufio.NewReader(io.LimitReader(os.Stdin, maxBody))).Decode(&in); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	hc := &http.Client{Timeout: httpTimeout}
	get := func(path, grant string) (map[string]any, error) {
		req, err := http.NewRequest(http.MethodGet, in.URL+path, nil)
		if err != nil {
			return nil, err
		}
		if grant != "" {
			req.Header.Set("Authorization", "Bearer "+grant)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		return map[string]any{"status": resp.StatusCode, "body": string(b)}, err
	}
	out := map[string]any{}
	for name, r := range map[string]struct{ path, grant string }{
		"anonymous": {"/", ""},
		"trials":    {"/", in.Grant},
		"trial":     {"/trials/" + url.PathEscape(in.Namespace), in.Grant},
		"metrics":   {"/metrics", in.Grant},
	} {
		a, err := get(r.path, r.grant)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

// pgLogin logs in to PostgreSQL once per DSN read from stdin (one JSON
// object: {"NAME": "postgres://…", ...}) with pgx, the driver the plane
// uses, and reports each one's session user, or the SQLSTATE it was
// refused with ("" and the error when there was no answer at all).
//
//	probe pg
func pgLogin([]string) (any, error) {
	var dsns map[string]string
	if err := json.NewDecoder(io.LimitReader(os.Stdin, maxBody)).Decode(&dsns); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	out := map[string]map[string]string{}
	for name, dsn := range dsns {
		r := map[string]string{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := pgx.Connect(ctx, dsn+"&connect_timeout=3")
		if err == nil {
			var user string
			err = c.QueryRow(ctx, "SELECT session_user").Scan(&user)
			r["user"] = user
			c.Close(ctx)
		}
		cancel()
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			r["code"] = pe.Code
		} else if err != nil {
			r["error"] = err.Error() // pgx names the host and user, never the password
		}
		out[name] = r
	}
	return out, nil
}
