package plane

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

var profiles = []string{rpc.ProfileCandidate, rpc.ProfileSidecar, rpc.ProfileAuthoring}

// CreateTrial mints a trial's whole identity from the CSPRNG, stores only
// digests of its secrets (and the one capability /internal/bootstrap hands
// out), and returns the identity once.
func (b *Broker) CreateTrial(ctx context.Context, req *rpc.TrialCreateRequest) (rpc.Identity, error) {
	if req.Profile == "" {
		req.Profile = rpc.ProfileCandidate
	}
	if !slices.Contains(profiles, req.Profile) {
		return rpc.Identity{}, rpc.Errorf(rpc.CodeBadRequest, "profile must be candidate, sidecar or authoring")
	}
	if req.Namespace == "" {
		req.Namespace = ident.Namespace()
	}
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.Identity{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	senders := req.AllowedSenders
	if senders == nil && req.Profile == rpc.ProfileCandidate {
		senders = []string{rpc.CandidateSender}
	}
	for _, s := range senders {
		if !mailmsg.ValidAddress(s) {
			return rpc.Identity{}, rpc.Errorf(rpc.CodeBadRequest, "invalid allowed sender")
		}
	}
	if req.BootstrapToken != "" && len(req.BootstrapToken) < 32 {
		return rpc.Identity{}, rpc.Errorf(rpc.CodeBadRequest, "a bootstrap token must be at least 32 characters")
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
	}
	ns := newNamespace(id.Profile, id.Namespace, id.ReadCapability, id.WriteCapability, senders)
	grants := []ledger.Grant{
		{Digest: ident.Digest(id.WriterGrant), Role: string(rpc.RoleWriter)},
		{Digest: ident.Digest(id.InboxGrant), Role: string(rpc.RoleInbox)},
	}
	err := b.ledger.CreateTrial(ctx, t, ns, grants)
	if errors.Is(err, ledger.ErrExists) {
		return rpc.Identity{}, rpc.Errorf(rpc.CodeConflict, "namespace %s already exists", id.Namespace)
	}
	if err != nil {
		return rpc.Identity{}, b.storeErr("create trial", err)
	}
	b.log.Info().Str("namespace", id.Namespace).Str("profile", id.Profile).Msg("trial created")
	return id, nil
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
	if err != nil {
		return t, ns, b.storeErr("trial", err)
	}
	if t.Destroyed {
		return t, ns, rpc.Errorf(rpc.CodeNotFound, "the trial of %s is destroyed", name)
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
	b.log.Info().Str("namespace", req.Namespace).Msg("namespace sealed")
	return rpc.Empty{}, nil
}

// DestroyTrial revokes every grant and credential of a trial.
func (b *Broker) DestroyTrial(ctx context.Context, req *rpc.TrialRequest) (rpc.Empty, error) {
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.Empty{}, err
	}
	if err := b.ledger.Destroy(ctx, t.ID); err != nil {
		return rpc.Empty{}, b.storeErr("destroy", err)
	}
	b.log.Info().Str("namespace", t.Namespace).Msg("trial destroyed")
	return rpc.Empty{}, nil
}

// ListTrials describes every trial without its secrets.
func (b *Broker) ListTrials(ctx context.Context) (rpc.TrialListResponse, error) {
	ts, err := b.ledger.Trials(ctx)
	if err != nil {
		return rpc.TrialListResponse{}, b.storeErr("trials", err)
	}
	out := rpc.TrialListResponse{Trials: []rpc.TrialInfo{}}
	for _, t := range ts {
		nss, err := b.ledger.Namespaces(ctx, t.ID)
		if err != nil {
			return out, b.storeErr("namespaces", err)
		}
		info := rpc.TrialInfo{Namespace: t.Namespace, Profile: t.Profile, State: ledger.StateActive, Created: t.Created, Namespaces: []string{}}
		for _, ns := range nss {
			info.Namespaces = append(info.Namespaces, ns.Name)
			info.Messages += ns.MessageCount
			info.Bytes += ns.ByteCount
			if ns.Name == t.Namespace {
				info.State = ns.State
			}
		}
		if t.Destroyed {
			info.State = ledger.StateDestroyed
		}
		out.Trials = append(out.Trials, info)
	}
	return out, nil
}

// CreateGrant mints a grant for a role not bound to a trial.
func (b *Broker) CreateGrant(ctx context.Context, role rpc.Role) (string, error) {
	if role != rpc.RoleGateway && role != rpc.RoleAdmin {
		return "", rpc.Errorf(rpc.CodeBadRequest, "only gateway and admin grants are minted alone; writer and inbox grants come with a trial")
	}
	g := ident.Grant()
	if err := b.ledger.AddGrant(ctx, ledger.Grant{Digest: ident.Digest(g), Role: string(role)}); err != nil {
		return "", b.storeErr("grant", err)
	}
	b.log.Info().Str("role", string(role)).Msg("grant created")
	return g, nil
}

// EnsureGrant makes a grant read from a file valid for role (the plane's
// bootstrap grants survive a lost database this way).
func (b *Broker) EnsureGrant(ctx context.Context, grant string, role rpc.Role) error {
	g, err := b.ledger.Grant(ctx, ident.Digest(grant))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return b.ledger.AddGrant(ctx, ledger.Grant{Digest: ident.Digest(grant), Role: string(role)})
	case err != nil:
		return err
	case g.Role != string(role) || g.Revoked:
		return errors.New("the grant file holds a grant for another role, or a revoked one")
	}
	return nil
}
