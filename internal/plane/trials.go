package plane

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/internal/webhooks"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// CreateTrial mints a trial's whole identity from the CSPRNG, stores only
// digests of its secrets (and the one capability /internal/bootstrap hands
// out), and returns the identity once. Its writer and inbox grants bind
// one surface process each to it (strict mode).
func (b *Broker) CreateTrial(ctx context.Context, req *rpc.TrialCreateRequest) (rpc.Identity, error) {
	id, _, err := b.createTrial(ctx, req, 0, nil, nil)
	return id, err
}

// createTrial mints and stores a trial; ttl > 0 gives it an expiry, and on
// a supervised stack it takes an SMTP port of its own from the pool (of
// any profile: the port alone selects the trial on a plain SMTP client's
// connection). A trial with doors in its network namespace (door) takes
// no port: its doors are its own.
func (b *Broker) createTrial(ctx context.Context, req *rpc.TrialCreateRequest, ttl time.Duration, door, agent *ledger.NetnsDoor) (rpc.Identity, ledger.Trial, error) {
	if req.Profile == "" {
		req.Profile = rpc.ProfileCandidate
	}
	if profileOf(req.Profile).name == "" {
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeBadRequest, "profile must be candidate, sidecar or authoring")
	}
	if req.Namespace == "" {
		req.Namespace = ident.Namespace()
	}
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	senders := req.AllowedSenders
	if senders == nil && req.Profile == rpc.ProfileCandidate {
		senders = []string{rpc.CandidateSender}
	}
	for _, s := range senders {
		if !mailmsg.ValidAddress(s) {
			return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeBadRequest, "invalid allowed sender")
		}
	}
	if req.BootstrapToken != "" && len(req.BootstrapToken) < 32 {
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeBadRequest, "a bootstrap token must be at least 32 characters")
	}
	schedule, err := parseFaults(req.Faults)
	if err != nil {
		return rpc.Identity{}, ledger.Trial{}, err
	}
	hooks, err := parseWebhooks(req.Webhooks)
	if err != nil {
		return rpc.Identity{}, ledger.Trial{}, err
	}
	id := rpc.Identity{
		Namespace:       req.Namespace,
		Profile:         req.Profile,
		ReadCapability:  ident.Capability(),
		InboxToken:      ident.InboxToken(),
		MailAPIToken:    ident.Capability(),
		BootstrapToken:  cmp.Or(req.BootstrapToken, ident.Capability()),
		WriteCapability: ident.Capability(),
		WriterGrant:     ident.Grant(),
		InboxGrant:      ident.Grant(),
	}
	t := &ledger.Trial{
		Profile:        id.Profile,
		MailAPIToken:   ident.Digest(id.MailAPIToken),
		BootstrapToken: ident.Digest(id.BootstrapToken),
		InboxToken:     ident.Digest(id.InboxToken),
		Created:        time.Now(),
		Faults:         schedule,
		Webhooks:       hooks,
	}
	if ttl > 0 {
		t.Expires = t.Created.Add(ttl) // from the same instant, so that ttl_ms reads back exactly
	}
	t.Door, t.AgentDoor = door, agent
	if door == nil {
		port, err := b.ports.take(ctx)
		if err != nil {
			return rpc.Identity{}, ledger.Trial{}, err
		}
		t.SMTPPort = port
	}
	ns := newNamespace(id.Profile, id.Namespace, id.ReadCapability, id.WriteCapability, senders)
	grants := []ledger.Grant{
		{Digest: ident.Digest(id.WriterGrant), Role: string(rpc.RoleWriter)},
		{Digest: ident.Digest(id.InboxGrant), Role: string(rpc.RoleInbox)},
	}
	err = b.ledger.CreateTrial(ctx, t, ns, grants)
	if errors.Is(err, ledger.ErrPortTaken) {
		// An open trial owns it: it is never handed out again (nor back).
		b.log.Error().Int("port", t.SMTPPort).Msg("a spare SMTP port is an open trial's; dropped")
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeStoreUnavailable, "no SMTP port is ready for a new trial")
	}
	if err != nil {
		b.ports.giveBack(t.SMTPPort)
	}
	if errors.Is(err, ledger.ErrExists) {
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeConflict, "namespace %s already exists", id.Namespace)
	}
	if errors.Is(err, ledger.ErrNetnsTaken) {
		return rpc.Identity{}, ledger.Trial{}, rpc.Errorf(rpc.CodeConflict,
			"netns %s: another open trial's doors are in that network namespace (one namespace holds one open trial: close that trial, or make a namespace for this one)", door.Netns)
	}
	if err != nil {
		return rpc.Identity{}, ledger.Trial{}, b.storeErr("create trial", err)
	}
	ev := b.log.Info().Str("namespace", id.Namespace).Str("profile", id.Profile)
	if ttl > 0 {
		ev = ev.Dur("ttl", ttl)
	}
	if t.SMTPPort > 0 {
		ev = ev.Int("smtp_port", t.SMTPPort)
	}
	if door != nil {
		ev = ev.Str("netns", door.Netns)
	}
	ev.Msg("trial created")
	if hooks != "" {
		b.hooks.again()
	}
	b.metrics.opened.Inc()
	return id, *t, nil
}

// Advertise is what the plane hands out of the shared surfaces in a
// trial's bundle: their URLs, as their clients reach them, and the SMTP
// host with the shared SMTP port (AUTH selects the trial there).
type Advertise struct {
	WriterURL, InboxURL, GatewayURL string
	SMTPHost                        string
	SMTPPort                        int
	// TLS, where the writer serves it (all empty otherwise).
	CAFile         string
	SMTPTLSPort    int
	WriterHTTPSURL string
	// IMAPPort and IMAPSPort, where the inbox serves IMAP (0 otherwise),
	// on InboxURL's host, with CAFile's CA.
	IMAPPort, IMAPSPort int
}

// SetAdvertise sets what trial.open hands out.
func (b *Broker) SetAdvertise(a Advertise) { b.advertise = a }

// OpenTrial opens a trial on the running stack and answers its bundle: the
// same as mail-plane up --json's, for surfaces shared by every trial.
func (b *Broker) OpenTrial(ctx context.Context, req *rpc.TrialOpenRequest) (rpc.Bundle, error) {
	if b.advertise.WriterURL == "" {
		return rpc.Bundle{}, rpc.Errorf(rpc.CodeBadRequest, "this plane serves no shared surfaces (serve --advertise-*): use trial.create")
	}
	if req.TTLMillis < 0 {
		return rpc.Bundle{}, rpc.Errorf(rpc.CodeBadRequest, "ttl_ms must not be negative")
	}
	if req.AgentNetns != "" && b.advertise.IMAPPort == 0 {
		return rpc.Bundle{}, rpc.Errorf(rpc.CodeBadRequest, "agent_netns: this stack's inbox serves no IMAP")
	}
	create := &rpc.TrialCreateRequest{Profile: req.Profile, Faults: req.Faults, Webhooks: req.Webhooks, Namespace: ident.Namespace()}
	var agent *ledger.NetnsDoor
	if req.AgentNetns != "" {
		d, err := b.ports.openAgentDoor(ctx, req.AgentNetns, create.Namespace)
		if err != nil {
			return rpc.Bundle{}, err
		}
		agent = ledgerDoor(d)
	}
	var door *ledger.NetnsDoor
	if req.Netns != "" {
		d, err := b.ports.openDoors(ctx, req.Netns)
		if err != nil {
			if agent != nil {
				b.ports.closeDoors(0, agent.Key)
			}
			return rpc.Bundle{}, err
		}
		door = ledgerDoor(d)
	}
	id, t, err := b.createTrial(ctx, create, time.Duration(req.TTLMillis)*time.Millisecond, door, agent)
	if err != nil {
		if door != nil {
			b.ports.closeDoors(0, door.Key)
		}
		if agent != nil {
			b.ports.closeDoors(0, agent.Key)
		}
		return rpc.Bundle{}, err
	}
	var bu rpc.Bundle
	if door != nil {
		b.ports.doorsOpened(t.ID, door.Key)
		bu = b.doorBundle(id, door)
	} else {
		bu = b.bundle(id, t.SMTPPort)
	}
	if agent != nil {
		b.ports.doorsOpened(t.ID, agent.Key)
		agentDoors(&bu, id, agent)
	}
	return bu, nil
}

// agentDoors points the bundle's agent part at the agent's doors inside
// its network namespace, on that loopback: the pages and MCP, and IMAP
// without TLS, LOGIN taken as it is.
func agentDoors(bu *rpc.Bundle, id rpc.Identity, d *ledger.NetnsDoor) {
	base := "http://" + net.JoinHostPort(rpc.NetnsDoorHost, strconv.Itoa(d.HTTPPort))
	bu.InboxURL = base + "/inbox/" + id.InboxToken
	bu.InboxMCPURL = base + "/mcp/" + id.InboxToken
	bu.InboxIMAP = &rpc.InboxIMAP{Host: rpc.NetnsDoorHost, Port: d.IMAPPort, Username: id.Namespace, Password: id.InboxToken, PlainLogin: true}
}

// bundle is a trial's part of the stack's bundle.
func (b *Broker) bundle(id rpc.Identity, smtpPort int) rpc.Bundle {
	a := b.advertise
	if smtpPort == 0 {
		smtpPort = a.SMTPPort
	}
	p := b.providers(a.WriterURL, id)
	return rpc.Bundle{
		Namespace:            id.Namespace,
		CandidateEnvironment: withWebhookKeys(wbenv.WithTLS(wbenv.WithSMTPAuth(wbenv.Candidate(a.WriterURL, a.SMTPHost, smtpPort, id.MailAPIToken, id.BootstrapToken)), a.CAFile, a.SMTPTLSPort, a.WriterHTTPSURL), p),
		InboxURL:             a.InboxURL + "/inbox/" + id.InboxToken,
		InboxMCPURL:          a.InboxURL + "/mcp/" + id.InboxToken,
		APIURL:               a.GatewayURL,
		ReadCapability:       id.ReadCapability,
		SMTPPort:             smtpPort,
		WriterURL:            a.WriterURL,
		CAFile:               a.CAFile,
		SMTPTLSPort:          a.SMTPTLSPort,
		WriterHTTPSURL:       a.WriterHTTPSURL,
		EvidencePublicKey:    b.PublicKey(),
		Providers:            p,
		InboxIMAP:            a.inboxIMAP(id),
	}
}

// inboxIMAP is a trial's account on the inbox's IMAP ports: the password
// is its inbox token; the user name is not looked at, and is the
// namespace, which is no secret.
func (a Advertise) inboxIMAP(id rpc.Identity) *rpc.InboxIMAP {
	if a.IMAPPort == 0 {
		return nil
	}
	host := ""
	if u, err := url.Parse(a.InboxURL); err == nil {
		host = u.Hostname()
	}
	return &rpc.InboxIMAP{Host: host, Port: a.IMAPPort, TLSPort: a.IMAPSPort, Username: id.Namespace,
		Password: id.InboxToken, CAFile: a.CAFile}
}

func newNamespace(profile, name, readCap, writeCap string, senders []string) *ledger.Namespace {
	boot := writeCap
	if profile != rpc.ProfileCandidate {
		boot = readCap
	}
	return &ledger.Namespace{
		Name:                name,
		ReadCapability:      ident.Digest(readCap),
		WriteCapability:     ident.Digest(writeCap),
		BootstrapCapability: boot,
		AllowedSenders:      senders,
		Tag:                 ident.StorageTag(),
	}
}

// trialOf finds the trial a namespace belongs to.
func (b *Broker) trialOf(ctx context.Context, name string) (ledger.Trial, ledger.Namespace, error) {
	ns, err := b.ledger.Namespace(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Trial{}, ns, rpc.Errorf(rpc.CodeNotFound, "no trial has namespace %s", name)
	}
	if err != nil {
		return ledger.Trial{}, ns, b.storeErr("namespace", err)
	}
	t, err := b.ledger.Trial(ctx, ns.TrialID)
	if errors.Is(err, ledger.ErrNotFound) {
		return t, ns, rpc.Errorf(rpc.CodeNotFound, "the trial of %s is closed", name)
	}
	if err != nil {
		return t, ns, b.storeErr("trial", err)
	}
	return t, ns, nil
}

// RotateTrial gives a trial a fresh namespace and read capability behind
// the same tokens and grants, and seals the previous namespace.
func (b *Broker) RotateTrial(ctx context.Context, req *rpc.TrialRotateRequest) (rpc.RotateResponse, error) {
	t, old, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.RotateResponse{}, err
	}
	if req.NewNamespace == "" {
		req.NewNamespace = ident.Namespace()
	}
	if !ident.ValidNamespace(req.NewNamespace) {
		return rpc.RotateResponse{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	readCap := ident.Capability()
	ns := newNamespace(t.Profile, req.NewNamespace, readCap, ident.Capability(), old.AllowedSenders)
	sealed, err := b.ledger.Rotate(ctx, t.ID, ns)
	if errors.Is(err, ledger.ErrExists) {
		return rpc.RotateResponse{}, rpc.Errorf(rpc.CodeConflict, "namespace %s already exists", req.NewNamespace)
	}
	if err != nil {
		return rpc.RotateResponse{}, b.storeErr("rotate", err)
	}
	b.lifecycleDone(sealed, ns.Name)
	if t.Webhooks != "" {
		b.hooks.again() // its new namespace's trail
	}
	b.log.Info().Str("namespace", ns.Name).Str("sealed", sealed).Msg("trial rotated")
	return rpc.RotateResponse{Namespace: ns.Name, ReadCapability: readCap, Sealed: sealed}, nil
}

// SealTrial retires the writer of a namespace; evaluator reads go on.
func (b *Broker) SealTrial(ctx context.Context, req *rpc.TrialRequest) (rpc.Empty, error) {
	if _, _, err := b.trialOf(ctx, req.Namespace); err != nil {
		return rpc.Empty{}, err
	}
	if err := b.ledger.Seal(ctx, req.Namespace); err != nil {
		return rpc.Empty{}, b.storeErr("seal", err)
	}
	b.lifecycleDone(req.Namespace)
	b.log.Info().Str("namespace", req.Namespace).Msg("namespace sealed")
	return rpc.Empty{}, nil
}

// CloseTrial closes a trial: every grant, token and capability of it is
// refused from the moment the close commits, its messages are deleted,
// its SMTP port is released, and readers waiting on it wake to find it
// gone.
func (b *Broker) CloseTrial(ctx context.Context, req *rpc.TrialRequest) (rpc.Empty, error) {
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.Empty{}, err
	}
	return rpc.Empty{}, b.closeTrial(ctx, t.ID, "closed")
}

// closeTrial deletes trial id whole; how says why, for the log.
func (b *Broker) closeTrial(ctx context.Context, id int64, how string) error {
	t, nss, err := b.ledger.CloseTrial(ctx, id, closeAction(how), b.bodies.queued())
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Errorf(rpc.CodeNotFound, "no such trial")
	}
	if err != nil {
		return b.storeErr("close", err)
	}
	b.ports.release(t.SMTPPort)
	b.ports.closeDoors(t.ID, "")
	for _, ns := range nss {
		b.wake.notify(ns.Name) // its readers wake to find it gone
		b.trails.notify(ns.Name)
	}
	b.log.Info().Str("namespace", t.Namespace).Str("how", how).Msg("trial " + how)
	b.metrics.closed.WithLabelValues(how).Inc()
	b.bodies.purgeQueued(ctx, b)
	return nil
}

// reapEvery is how often the plane closes expired trials and retries
// purges. An expired trial is refused from its expiry on, whenever the
// reaper comes.
const reapEvery = 500 * time.Millisecond

// Run closes expired trials and retries queued purges until ctx ends.
func (b *Broker) Run(ctx context.Context) {
	go b.runDelays(ctx)
	go b.runWebhooks(ctx)
	tick := time.NewTicker(reapEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ts, err := b.ledger.Expired(ctx, time.Now(), 256)
		if err != nil {
			b.log.Warn().Err(err).Msg("expiry check failed")
			continue
		}
		for _, t := range ts {
			// Not found: another plane on the database closed it first.
			if err := b.closeTrial(ctx, t.ID, "expired"); err != nil && rpc.CodeOf(err) != rpc.CodeNotFound {
				b.log.Warn().Err(err).Str("namespace", t.Namespace).Msg("closing an expired trial failed; will retry")
			}
		}
		b.bodies.purgeQueued(ctx, b)
		b.flushUnrecorded(ctx)
		b.reapTrails(ctx)
		b.logUnbound()
	}
}

// ListTrials describes open trials without their secrets, a page at a
// time.
func (b *Broker) ListTrials(ctx context.Context, req *rpc.TrialListRequest) (rpc.TrialListResponse, error) {
	limit := req.Limit
	if limit <= 0 || limit > rpc.MaxTrialPage {
		limit = rpc.MaxTrialPage
	}
	ts, err := b.ledger.Trials(ctx, req.After, limit)
	if err != nil {
		return rpc.TrialListResponse{}, b.storeErr("trials", err)
	}
	out := rpc.TrialListResponse{Trials: []rpc.TrialInfo{}}
	for _, t := range ts {
		info, err := b.infoOf(ctx, t)
		if err != nil {
			return out, err
		}
		out.Trials = append(out.Trials, info)
	}
	if len(ts) == limit {
		out.Next = ts[len(ts)-1].ID
	}
	return out, nil
}

// InfoTrial describes the open trial a namespace (current or sealed)
// belongs to, without its secrets: what a harness reads to learn, say,
// that the trial's SMTP port moved.
func (b *Broker) InfoTrial(ctx context.Context, req *rpc.TrialRequest) (rpc.TrialInfo, error) {
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.TrialInfo{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.TrialInfo{}, err
	}
	return b.infoOf(ctx, t)
}

// infoOf describes trial t with its namespaces' counts.
func (b *Broker) infoOf(ctx context.Context, t ledger.Trial) (rpc.TrialInfo, error) {
	nss, err := b.ledger.Namespaces(ctx, t.ID)
	if err != nil {
		return rpc.TrialInfo{}, b.storeErr("namespaces", err)
	}
	info := rpc.TrialInfo{Namespace: t.Namespace, Profile: t.Profile, State: ledger.StateActive, Created: t.Created,
		Namespaces: []string{}, SMTPPort: t.SMTPPort, AgeMillis: time.Since(t.Created).Milliseconds(), Plane: t.Plane,
		SealedReason: t.SealedReason}
	if !t.Expires.IsZero() {
		info.Expires = &t.Expires
		info.TTLMillis = t.Expires.Sub(t.Created).Milliseconds()
	}
	if t.Faults != "" {
		info.Faults = json.RawMessage(t.Faults)
	}
	if hs, err := webhooks.Load(t.Webhooks); err == nil && len(hs) > 0 {
		info.Webhooks = webhooks.Shown(hs)
	}
	if info.FaultsInjected, err = b.ledger.FaultsInjected(ctx, t.ID); err != nil {
		return rpc.TrialInfo{}, b.storeErr("faults", err)
	}
	for _, ns := range nss {
		info.Namespaces = append(info.Namespaces, ns.Name)
		info.Messages += ns.MessageCount
		info.Bytes += ns.ByteCount
		if ns.Name == t.Namespace {
			info.State = ns.State
		}
	}
	return info, nil
}

// CreateGrant mints a grant bound to no trial: a gateway's or an admin's,
// or a writer's or inbox's that serves every trial (a shared surface).
func (b *Broker) CreateGrant(ctx context.Context, req *rpc.GrantCreateRequest) (rpc.GrantResponse, error) {
	if !slices.Contains(rpc.RoleNames, string(req.Role)) {
		return rpc.GrantResponse{}, rpc.Errorf(rpc.CodeBadRequest, "role must be one of %v", rpc.RoleNames)
	}
	g := ident.Grant()
	if err := b.ledger.AddGrant(ctx, ledger.Grant{Digest: ident.Digest(g), Role: string(req.Role)}); err != nil {
		return rpc.GrantResponse{}, b.storeErr("grant", err)
	}
	b.log.Info().Str("role", string(req.Role)).Msg("grant created")
	return rpc.GrantResponse{Grant: g}, nil
}

// EnsureGrant makes a grant read from a file valid for role (the plane's
// bootstrap grants survive a lost database this way).
func (b *Broker) EnsureGrant(ctx context.Context, grant string, role rpc.Role) error {
	g, err := b.ledger.Grant(ctx, ident.Digest(grant))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		err := b.ledger.AddGrant(ctx, ledger.Grant{Digest: ident.Digest(grant), Role: string(role)})
		if errors.Is(err, ledger.ErrExists) {
			// Another plane on the database added it first: check it.
			return b.EnsureGrant(ctx, grant, role)
		}
		return err
	case err != nil:
		return err
	case g.Role != string(role) || g.Revoked:
		return errors.New("the grant file holds a grant for another role, or a revoked one")
	}
	return nil
}
