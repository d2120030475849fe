// Package ledger is the contract of the plane's durable policy and index:
// the rows it keeps (trials, namespaces, grants, the index of accepted
// messages), its refusals, and Ledger, what the broker asks of it. The
// ledger in a database, SQLite or PostgreSQL, is package sqlledger; this
// package links no database, so neither does the broker.
package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/faults"
)

// Ledger is what the broker asks of the ledger (package sqlledger, which
// documents each method). Every decision that reads and then writes is
// one transaction; a message's body, when no external store keeps it
// (Offer.Ref), commits with its index entry and is deleted with its trial.
type Ledger interface {
	// Health.
	Ping(ctx context.Context) error
	PingWrite(ctx context.Context, minFree uint64) error

	// Policy caches: PolicyGen changes whenever a cached decision may have.
	PolicyGen() uint64
	ForgetPolicy()

	// Trials, namespaces and grants.
	CreateTrial(ctx context.Context, t *Trial, ns *Namespace, grants []Grant) error
	AddGrant(ctx context.Context, g Grant) error
	Rotate(ctx context.Context, trialID int64, ns *Namespace) (sealed string, err error)
	Seal(ctx context.Context, name string) error
	SealTrial(ctx context.Context, id int64, reason string) (Trial, error)
	CloseTrial(ctx context.Context, trialID int64, action string, queue bool) (Trial, []Namespace, error)
	Grant(ctx context.Context, digest []byte) (Grant, error)
	Trial(ctx context.Context, id int64) (Trial, error)
	TrialBy(ctx context.Context, kind Credential, d []byte) (Trial, error)
	TrialByPort(ctx context.Context, port int) (Trial, error)
	TrialByDoor(ctx context.Context, key string) (Trial, error)
	Trials(ctx context.Context, after int64, limit int) ([]Trial, error)
	Expired(ctx context.Context, now time.Time, limit int) ([]Trial, error)
	Namespace(ctx context.Context, name string) (Namespace, error)
	Namespaces(ctx context.Context, trialID int64) ([]Namespace, error)
	SMTPPorts(ctx context.Context) ([]int, error)
	MovePort(ctx context.Context, from, to int) (Trial, error)
	NetnsDoors(ctx context.Context) ([]NetnsDoor, error)
	OpenTrials(ctx context.Context) (int64, error)

	// Mail: sends, the index, bodies, and an external store's purges.
	Precheck(ctx context.Context, o *Offer) (e Entry, replayed bool, err error)
	Accept(ctx context.Context, o *Offer) (Entry, bool, error)
	Entry(ctx context.Context, ns string, seq int64) (Entry, error)
	Entries(ctx context.Context, ns string, after int64) ([]Entry, error)
	Body(ctx context.Context, ns, ref string) ([]byte, error)
	Index(ctx context.Context, ns, ref string) ([]byte, error)
	Learned(ctx context.Context, ns, addr string) (some, known bool, err error)
	Purges(ctx context.Context) ([]Namespace, error)
	Purged(ctx context.Context, tag string) error

	// Faults.
	SetFaults(ctx context.Context, trialID int64, ns, stored string) error
	FaultsInjected(ctx context.Context, trialID int64) (int64, error)
	NextDelayed(ctx context.Context) (time.Time, error)
	DeliverDue(ctx context.Context, now time.Time) ([]string, error)

	// Webhooks (package webhooks): a trial's endpoints, and its outbox
	// of events derived from its trails (package sqlledger's webhooks.go).
	SetWebhooks(ctx context.Context, trialID int64, ns, stored string) error
	WebhookNamespaces(ctx context.Context) ([]WebhookNamespace, error)
	WebhookCursor(ctx context.Context, ns string) (int64, error)
	AddWebhookEvents(ctx context.Context, trialID int64, ns string, from, to int64, evs []WebhookEvent) error
	PendingWebhookEvents(ctx context.Context, trialID int64) (int, error)
	DueWebhookEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]WebhookEvent, error)
	NextWebhookDue(ctx context.Context, after time.Time) (time.Time, error)
	WebhookAttempted(ctx context.Context, a WebhookAttempt) error
	WebhookEvents(ctx context.Context, trialID int64) ([]WebhookEvent, error)
	WebhookEvent(ctx context.Context, trialID, seq int64) (WebhookEvent, error)

	// Trails.
	SetEventBudget(n int64)
	AppendEvent(ctx context.Context, ns string, e evidence.Event) error
	Events(ctx context.Context, ns string, after int64, limit int) ([]string, error)
	TrailOf(ctx context.Context, ns string) (exists, closed bool, err error)
	// Opened is the seqs of ns's messages the agent opened (its inbox
	// shows the rest as unread).
	Opened(ctx context.Context, ns string) (map[int64]bool, error)
	// SetFlag and Flags keep the flags the agent sets over IMAP.
	SetFlag(ctx context.Context, ns string, seqs []int64, flag string, on bool) error
	Flags(ctx context.Context, ns string) (map[int64][]string, error)
	FlushTrail(ctx context.Context, ns string) error
	DeleteTrails(ctx context.Context, cutoff time.Time, limit int) (int, error)
	ClosedAt(ctx context.Context, ns string) (time.Time, bool, error)

	// The operator's console.
	ConsoleCount(ctx context.Context, f ConsoleFilter) (open, closed int, err error)
	ConsolePage(ctx context.Context, f ConsoleFilter, offset, limit int) ([]ConsoleRow, error)
	ConsoleTrails(ctx context.Context, nss []string) (map[string]TrailStats, error)
	LastEvents(ctx context.Context, ns string, limit int) ([]string, error)

	// Unavailable reports whether err, which the ledger returned, means
	// its database cannot answer now (closed, unreachable, busy, full, out
	// of time): an outage. Its other errors are bugs.
	Unavailable(err error) bool
}

// ErrNotFound means no row matched.
var ErrNotFound = errors.New("ledger: not found")

// ErrExists means a namespace of that name already exists.
var ErrExists = errors.New("ledger: already exists")

// Refusals of Accept. Anything else it returns is a storage failure.
var (
	ErrNotActive           = errors.New("ledger: namespace does not take mail")
	ErrCapacity            = errors.New("ledger: namespace quota exhausted")
	ErrIdempotencyConflict = errors.New("ledger: idempotency key reused with another payload")
)

// ErrPortTaken means another open trial of the plane owns the SMTP port.
var ErrPortTaken = errors.New("ledger: the SMTP port is taken by an open trial")

// ErrNetnsTaken means an open trial of the plane already has its doors in
// the same network namespace (the same identity, whatever its path).
var ErrNetnsTaken = errors.New("ledger: an open trial's doors are in that network namespace")

// Namespace states.
const (
	StateActive = "active"
	StateSealed = "sealed"
)

// StateClosed is the state of a kept trail whose trial is closed.
const StateClosed = "closed"

// Trial is a trial's durable row. Secrets are digests.
type Trial struct {
	ID             int64
	Profile        string
	Namespace      string // current
	MailAPIToken   []byte
	BootstrapToken []byte
	InboxToken     []byte
	Created        time.Time // CreateTrial stores now when zero
	Expires        time.Time // zero: no TTL
	SMTPPort       int       // the trial's own SMTP port on a shared writer; 0: none
	Plane          string    // the identity of the plane that opened it and serves its port
	// Faults is the trial's fault schedule as stored (package faults'
	// JSON; "" for none). Given to CreateTrial, it is the first one.
	Faults string
	// SealedReason says why the plane sealed the trial (SealTrial); empty
	// otherwise.
	SealedReason string
	// Webhooks are the trial's provider webhooks as stored (package
	// webhooks' JSON; "" for none). Given to CreateTrial, the first ones.
	Webhooks string
	// Door, given to CreateTrial only, is the trial's doors inside its
	// network namespace; the trial's reads do not fill it.
	Door *NetnsDoor
	// AgentDoor, given to CreateTrial only, is the agent's IMAP door
	// inside the agent's network namespace (Agent set).
	AgentDoor *NetnsDoor
}

// Expired reports whether the trial's TTL has passed at now. An expired
// trial is closed: nothing it holds works any more, even before the
// plane's reaper has deleted it.
func (t Trial) Expired(now time.Time) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) }

// Namespace is a namespace's durable row.
type Namespace struct {
	Name            string
	TrialID         int64
	State           string
	ReadCapability  []byte
	WriteCapability []byte
	// BootstrapCapability is the one capability kept in clear: the value
	// /internal/bootstrap must hand out (the write capability of a candidate
	// trial, the read capability of a sidecar or authoring trial).
	BootstrapCapability string
	AllowedSenders      []string
	Tag                 string
	NextSeq             int64
	MessageCount        int64
	ByteCount           int64
	Created             time.Time
}

// Grant is a grant's durable row.
type Grant struct {
	Digest  []byte
	Role    string
	TrialID int64 // 0 for roles not bound to a trial
	Revoked bool
}

// Credential kinds a trial can be found by.
type Credential int

const (
	ByMailAPIToken Credential = iota + 1
	ByBootstrapToken
	ByInboxToken
	ByWriteCapability // of any of the trial's namespaces
)

// NetnsDoor is a trial's candidate doors inside its network namespace, or
// the agent's (Agent):
// the file that names the namespace, the key the shared writer presents
// for them (rpc.NetnsDoor), and their ports there, kept so that a restart
// binds them again where the trial's bundle says they are.
type NetnsDoor struct {
	Key                             string
	TrialID                         int64
	Namespace                       string // the trial's current one
	Netns                           string
	HTTPPort, SMTPPort, SMTPTLSPort int
	// Dev and Ino are the namespace file's identity when the doors were
	// first bound (0: a door stored before identities, known by path).
	Dev, Ino uint64
	// Agent: the agent's doors (its Key is the trial's namespace when it
	// opened): IMAP at IMAPPort, the pages and MCP at HTTPPort.
	Agent    bool
	IMAPPort int
}

// Entry is one accepted message in the index.
type Entry struct {
	Namespace string
	Seq       int64
	UUID      string
	From      string
	To        []string
	Size      int
	Ref       string
	Received  time.Time
	// Fault is "delay" or "duplicate" for a message a fault delivered
	// late or stored more than once (package sqlledger's faults.go).
	Fault string
	// Injected, in Accept's answer, is the fault a rule of the trial's
	// schedule made of the send, if one did.
	Injected *Injected
}

// Offer is a message the plane has checked and wants to accept.
type Offer struct {
	Namespace      string
	UUID           string
	From           string
	To             []string
	Size           int
	IdempotencyKey string
	Fingerprint    string
	// Quotas; 0 means unlimited.
	MaxMessages, MaxBytes int64
	// Exempt: the message counts toward no quota (the evaluator's planted
	// mail); give it no quotas either.
	Exempt bool
	// Body is the message's bytes (scrubbed), which the ledger keeps in
	// its own database, written in the transaction that accepts them;
	// unless Ref is set: then an external store already holds them
	// durably, under Ref, and Body is not stored.
	Body []byte
	Ref  string
	// Index is the message's index (package mailindex), stored under its
	// ref in the same transaction, whoever keeps the body; nil stores
	// none.
	Index []byte
	// Event, when set, is the accepted event to record with the message
	// in the same savepoint (its message id, email id and size are set
	// here): a send is answered only once its event is durable, and a send
	// not accepted leaves none.
	Event *evidence.Event
	// Bounce: every recipient is a provider's bounce simulator
	// (bounced@resend.dev, bounce@simulator.amazonses.com): the send is
	// accepted and nothing is stored (package webhooks reports it).
	Bounce bool
	// Faults, set for a send of a trial with a fault schedule, has the
	// send counted and judged against it in its own savepoint (package sqlledger's faults.go).
	Faults *FaultCheck
}

// FaultCheck is a send's door and trial, for a trial with a schedule.
type FaultCheck struct {
	Trial int64
	Door  faults.Door
}

// Injected is the fault a rule made of a send.
type Injected struct {
	Index     int
	Rule      faults.Rule
	VisibleAt time.Time // delay: when the message shows
	Copies    int       // duplicate: how many were stored
}

// Webhook event states.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"  // its retries ran out
	WebhookDropped   = "dropped" // a webhook fault dropped it
)

// WebhookNamespace is a namespace of an open trial with webhooks, and
// how far its trail and its webhook cursor are: its events are derived
// to Cursor, and its trail has lines to Head.
type WebhookNamespace struct {
	Name    string
	TrialID int64
	Head    int64 // the trail's last seq (0: none yet)
	Cursor  int64 // WebhookCursor
}

// WebhookEvent is one event of a trial's outbox for one of its webhooks
// (Hook, its index) about one send (EmailID): ID is the same on every
// attempt (and on the copies a duplicate fault makes), Data the event as
// package webhooks made it, Log the attempts so far (a JSON list).
type WebhookEvent struct {
	TrialID   int64
	Seq       int64
	ID        string
	Hook      int
	EmailID   string
	Namespace string
	Kind      string
	Data      string
	State     string
	Attempts  int
	Due       time.Time
	Log       string
}

// WebhookAttempt is one delivery attempt's outcome: the event's new
// state, when it is next due if still pending, the attempt's entry for
// its log, and its trail event.
type WebhookAttempt struct {
	TrialID, Seq int64
	State        string
	Due          time.Time
	Entry        string
	Event        evidence.Event
}

// ConsoleRow is one open trial (its current namespace) or one kept trail
// of a closed trial.
type ConsoleRow struct {
	Namespace string
	Profile   string // "" for a closed trial: its row is gone
	State     string // StateActive, StateSealed or StateClosed
	Created   time.Time
	Expires   time.Time // zero: no TTL
	Closed    time.Time // zero: open
	Messages  int64
}

// ConsoleFilter selects rows: Namespace is a substring of the namespace
// (without case), Recipient an address delivered to (without case): an
// open trial's learned recipients, a closed one's kept trail's sends.
type ConsoleFilter struct {
	Namespace, Recipient string
}

// TrailStats counts a namespace's trail: its events, those refused, the
// faults injected, and its first and last event's lines.
type TrailStats struct {
	Events, Refused, Faults int64
	First, Last             string
}

// Change is a commit a plane announced.
type Change struct {
	Namespace string
	// Policy: trials, namespaces or grants changed; caches of them forget.
	Policy bool
	// All: announcements may have been missed (the listening connection
	// was lost); every waiter re-checks and every cache forgets.
	All bool
	// Down: the listening connection is lost; until a Change with All, no
	// policy cache serves.
	Down bool
}
