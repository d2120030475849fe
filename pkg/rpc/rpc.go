// Package rpc is the wire protocol between mail-plane and the processes that
// call it: the three surfaces (mail-writer, mail-inbox, mail-gateway) and the
// operator's CLI.
//
// The transport is HTTP/1.1 with JSON bodies over one Unix stream socket
// (a send's body is framed: SendRequest.Frame). Every call is POST
// /v1/{method} with the caller's grant as a Bearer token;
// the plane also reads the caller's uid/gid from the socket (SO_PEERCRED).
// The version is part of every path, so a caller that speaks another version
// gets CodeUnsupportedVersion on its first call, not a misread answer.
package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version; it prefixes every path.
const Version = "v1"

// Frame limits, enforced by the plane before it allocates (request) and by
// the client before it decodes (response).
const (
	MaxRequestBytes  = 2 << 20  // a 1 MiB message as it is (see SendRequest.Frame), with room for its envelope
	MaxResponseBytes = 64 << 20 // a list of messages under an unlimited quota
	MaxWait          = 60 * time.Second
)

// Role is what a grant lets its holder be.
type Role string

const (
	RoleWriter  Role = "writer"  // sends into a trial: its own (strict mode), or the one its caller's credential opens (shared)
	RoleInbox   Role = "inbox"   // reads a trial's current namespace, without OTP: its own, or the one an inbox token opens
	RoleGateway Role = "gateway" // reads any namespace whose read capability its caller presents
	RoleAdmin   Role = "admin"   // creates, rotates, seals and destroys trials
)

// RoleNames names every role, as flags and peer policies spell them.
var RoleNames = []string{string(RoleWriter), string(RoleInbox), string(RoleGateway), string(RoleAdmin), string(RoleConsole), string(RoleHooks)}

// Methods. The plane's authorization table names each of them once.
const (
	MethodHealth      = "health"
	MethodSend        = "send"
	MethodBootstrap   = "bootstrap"
	MethodList        = "list"
	MethodGet         = "get"
	MethodLatest      = "latest"
	MethodTrialCreate = "trial.create"
	MethodTrialRotate = "trial.rotate"
	MethodTrialSeal   = "trial.seal"
	MethodTrialList   = "trial.list"
	MethodTrialInfo   = "trial.info"  // one trial's description, without its secrets
	MethodTrialOpen   = "trial.open"  // create, and answer the trial's bundle
	MethodTrialClose  = "trial.close" // destroy: revoke everything and delete the trial's mail
	MethodGrantCreate = "grant.create"
	MethodPortsSync   = "ports.sync" // the supervisor's loop that keeps per-trial SMTP ports
	MethodEvents      = "events"     // a namespace's trail (package evidence), opened by its read capability
	MethodExport      = "evidence.export"
	MethodReport      = "report" // the writer: SMTP sessions it refused before any message
	// MethodCredentialCheck asks whether a credential opens a trial for
	// writing (SMTP AUTH, and POST /emails before the request is judged).
	MethodCredentialCheck = "credential.check"
	// MethodRefusal records a request the writer refused for its form, in
	// the trail of the trial its credential opens.
	MethodRefusal = "send.refused"
	MethodClick   = "click" // the inbox: the agent followed a link of a message (its ping)
	MethodFlag    = "flag"  // the inbox: the agent set or cleared a flag over IMAP
	// MethodReadCheck asks which namespace a reader's credential opens
	// (a shared inbox's token; the gateway's read capability, for the
	// namespace it names) before the request is served. Nothing is read,
	// and nothing is recorded in any trail.
	MethodReadCheck  = "read.check"
	MethodTrialPlant = "trial.plant"
)

// Profiles of a trial.
const (
	// ProfileCandidate is a scored trial: the sender is pinned, POST /emails
	// takes the mail-API token (or the write capability), SMTP is fixed to
	// the namespace, and /internal/bootstrap hands out the write capability.
	ProfileCandidate = "candidate"
	// ProfileSidecar is the reference sidecar: POST /emails takes the
	// bootstrap token, SMTP selects the namespace by header with the read
	// capability, and /internal/bootstrap hands out the read capability.
	ProfileSidecar = "sidecar"
	// ProfileAuthoring is the sidecar's contract for reference capture, with
	// rotation to a fresh namespace behind the same bootstrap token.
	ProfileAuthoring = "authoring"
)

// CandidateSender is the envelope sender a candidate trial pins.
const CandidateSender = "no-reply@candidate.websitebench.local"

// Via says through which door a message arrived; the plane decides from it
// which credential the sender must have presented.
type Via string

const (
	ViaHTTP       Via = "http"        // POST /emails: Credential is the Bearer token
	ViaSMTP       Via = "smtp"        // SMTP fixed to the trial's namespace: no credential
	ViaSMTPSelect Via = "smtp-select" // SMTP naming Namespace by header: Credential is the capability header
	ViaSMTPAuth   Via = "smtp-auth"   // SMTP after AUTH: Credential is the AUTH password, judged as ViaHTTP's Bearer
)

// Error is the plane's answer to a call it did not do: a refusal, an
// outage or its own bug (Class). Code is stable; Message is for humans and
// never holds a secret.
type Error struct {
	Code string `json:"code"`
	// Class is what the error means to the caller (errclass.go). The
	// plane sets it on every answer; one decoded without it takes the
	// class its Code has.
	Class   Class  `json:"class,omitempty"`
	Message string `json:"message"`
	// Field, on CodeInvalidEnvelope and CodeTooManyRecipients, is the part
	// of the envelope refused: "from" or "to". With "from", Allowed is
	// the senders the trial allows, which its candidate was given
	// (WEBSITEBENCH_MAIL_FROM): a surface may name them in its answer.
	Field   string   `json:"field,omitempty"`
	Allowed []string `json:"allowed,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("plane: %s: %s", e.Code, e.Message) }

// Codes. The first group is about the call itself; the second is policy the
// surfaces map to their own answers; the last group is outages (503 / 451)
// and the plane's own bugs (500).
const (
	CodeBadRequest         = "bad_request"
	CodeUnsupportedVersion = "unsupported_version"
	CodeUnknownMethod      = "unknown_method"
	CodeFrameTooLarge      = "frame_too_large"
	CodeUnauthenticated    = "unauthenticated"   // no, unknown or revoked grant, or a peer uid/gid not allowed
	CodePermissionDenied   = "permission_denied" // the grant's role may not call this method or touch this namespace
	CodeDeadlineExceeded   = "deadline_exceeded"

	CodeInvalidNamespace    = "invalid_namespace"    // syntax
	CodeForbidden           = "forbidden"            // read capability wrong, unknown or destroyed namespace
	CodeRecipientForbidden  = "recipient_forbidden"  // filter on an address never delivered to
	CodeNotFound            = "not_found"            // message or trial
	CodeUnauthorized        = "unauthorized"         // write credential wrong
	CodeInvalidCapability   = "invalid_capability"   // selecting SMTP: namespace or capability header wrong
	CodeSealed              = "sealed"               // namespace no longer takes mail
	CodeInvalidEnvelope     = "invalid_envelope"     // sender or recipients refused by policy
	CodeTooManyRecipients   = "too_many_recipients"  // more than MaxRecipients
	CodeMessageTooLarge     = "message_too_large"    // over the per-message limit
	CodeMailboxCapacity     = "mailbox_capacity"     // namespace quota exhausted
	CodeIdempotencyConflict = "idempotency_conflict" // same key, different payload
	CodeConflict            = "conflict"             // admin: namespace exists with another identity

	CodeStoreUnavailable = "store_unavailable" // the plane is up, its store cannot answer now (Outage)
	CodeInternal         = "internal_error"    // a bug (500): in the plane, or an answer the client cannot decode (Bug)
	CodePlaneUnavailable = "plane_unavailable" // the plane cannot be reached (set by the client; Outage)
)

// HealthResponse answers MethodHealth.
type HealthResponse struct {
	Role  Role   `json:"role"`
	Store string `json:"store"` // "ok" or "unavailable"
	// EvidencePublicKey is the key the plane signs trails with (base64 of
	// its 32 bytes): mail-plane evidence verify --key.
	EvidencePublicKey string `json:"evidence_public_key,omitempty"`
	// UnboundRefusals (to the admin only) counts calls refused since the
	// plane started whose credential opens no trial: they are in no trail.
	UnboundRefusals int64 `json:"unbound_refusals,omitempty"`
}

// SendRequest asks the plane to accept one message. Raw is the message as
// the writer received it (SMTP DATA after dot-unstuffing) or composed it
// (POST /emails); the plane scrubs its headers before storing it. It
// travels framed, not as JSON (see Frame).
type SendRequest struct {
	Via        Via    `json:"via"`
	Credential string `json:"credential,omitempty"`
	Namespace  string `json:"namespace,omitempty"` // ViaSMTPSelect only
	// Port is the local port of the SMTP listener a ViaSMTP message came
	// in by: on a shared writer it selects the trial that owns that port.
	// With ViaSMTPAuth on a trial's own port, the credential must open
	// the trial that owns Port.
	Port int `json:"port,omitempty"`
	// Door is the key of the listener a ViaSMTP message came in by when
	// the listener is one of a trial's doors inside its network namespace
	// (NetnsDoor): port numbers repeat across namespaces, the key does not.
	Door string   `json:"door,omitempty"`
	From string   `json:"from"`
	To   []string `json:"to"`
	Raw  []byte   `json:"-"`
	// IdempotencyKey and Fingerprint (a digest of the request payload) make
	// a repeat return the first answer, and a repeat with another payload
	// fail with CodeIdempotencyConflict.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Fingerprint    string `json:"fingerprint,omitempty"`
	// API names the provider-compatible send API a ViaHTTP message came
	// through ("sendgrid", "postmark", "mailgun", "ses"; empty for POST
	// /emails), for the trail.
	API string `json:"api,omitempty"`
	// SigV4, in place of Credential, is an AWS Signature Version 4 proof
	// (SES): the plane verifies it with the secret access key of the trial
	// whose namespace is its access key id.
	SigV4 *SigV4Proof `json:"sigv4,omitempty"`
}

// SigV4Proof is what the plane needs to check a SigV4-signed request
// without the request: the access key id (the trial's namespace), the
// string to sign the writer built from the request, and the signature.
// The string to sign holds the request's hash, time and scope, so a proof
// opens one trial, for one request, for a quarter of an hour.
type SigV4Proof struct {
	AccessKeyID  string `json:"access_key_id"`
	StringToSign string `json:"string_to_sign"`
	Signature    string `json:"signature"`
}

// CredentialRequest asks whether Credential, presented at the door Via
// (with Port, for SMTP AUTH on a trial's own port), opens a trial for
// writing (MethodCredentialCheck). Nothing is judged but the credential,
// and nothing is stored. A writer asks it to answer a malformed request in
// the reference's order (a wrong credential first). A provider API's
// request presents SigV4 in place of Credential (SES), and names its API.
type CredentialRequest struct {
	Via        Via         `json:"via"`
	Credential string      `json:"credential,omitempty"`
	Port       int         `json:"port,omitempty"`
	SigV4      *SigV4Proof `json:"sigv4,omitempty"`
	API        string      `json:"api,omitempty"`
}

// CredentialResponse answers a credential check (MethodCredentialCheck,
// MethodReadCheck) that opened a trial: the namespace it opened, by which
// a shared surface counts the caller's fair share (the credential itself
// is never a share's key).
type CredentialResponse struct {
	Namespace string `json:"namespace"`
}

// RefusalRequest is a credential check (MethodRefusal) for a request the
// writer answers with the stable code Code (a malformed request): if the
// credential opens the trial, the plane records the refusal in the
// trial's trail.
type RefusalRequest struct {
	CredentialRequest
	Code string `json:"code"`
}

// SendContentType is the type of a send's frame.
const SendContentType = "application/vnd.mailplane.send"

// Frame encodes r as a send travels: its fields as one line of JSON (which
// never holds a raw newline), a newline, then the message's bytes as they
// are. Inside JSON a message travels base64-encoded, a third larger, and
// costs an encoding and a decoding at each end.
func (r *SendRequest) Frame() ([]byte, error) {
	head := r.frameHead()
	return append(append(make([]byte, 0, len(head)+len(r.Raw)), head...), r.Raw...), nil
}

// frameHead is the frame's JSON line and its newline: what
// json.Marshal(r) writes, field by field without reflection, which every
// send paid for (4% of the writer's CPU under SMTP). TestFrameHead holds
// it to json.Marshal's bytes.
func (r *SendRequest) frameHead() []byte {
	n := 96 + len(r.Via) + len(r.Credential) + len(r.Namespace) + len(r.Door) + len(r.From) +
		len(r.IdempotencyKey) + len(r.Fingerprint) + len(r.API)
	for _, to := range r.To {
		n += len(to) + 3
	}
	if r.SigV4 != nil {
		n += 64 + len(r.SigV4.AccessKeyID) + len(r.SigV4.StringToSign) + len(r.SigV4.Signature)
	}
	b := append(make([]byte, 0, n), `{"via":`...)
	b = appendJSONString(b, string(r.Via))
	field := func(name, v string) {
		if v != "" {
			b = append(b, name...)
			b = appendJSONString(b, v)
		}
	}
	field(`,"credential":`, r.Credential)
	field(`,"namespace":`, r.Namespace)
	if r.Port != 0 {
		b = strconv.AppendInt(append(b, `,"port":`...), int64(r.Port), 10)
	}
	field(`,"door":`, r.Door)
	b = appendJSONString(append(b, `,"from":`...), r.From)
	b = append(b, `,"to":`...)
	if r.To == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, to := range r.To {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, to)
		}
		b = append(b, ']')
	}
	field(`,"idempotency_key":`, r.IdempotencyKey)
	field(`,"fingerprint":`, r.Fingerprint)
	field(`,"api":`, r.API)
	if p := r.SigV4; p != nil {
		b = appendJSONString(append(b, `,"sigv4":{"access_key_id":`...), p.AccessKeyID)
		b = appendJSONString(append(b, `,"string_to_sign":`...), p.StringToSign)
		b = appendJSONString(append(b, `,"signature":`...), p.Signature)
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as json.Marshal writes it. Printable ASCII
// that JSON and HTML leave alone, which is nearly every envelope, goes
// as it is, and the line breaks of a SigV4 string to sign as \n;
// anything else is json.Marshal's to escape.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\n' || c > '~' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		b = append(append(b, s[:i]...), `\n`...)
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '"')
}

// SplitSendFrame splits a send's frame into its JSON line and its message
// (which the returned slice shares with frame).
func SplitSendFrame(frame []byte) (head, raw []byte, ok bool) {
	i := bytes.IndexByte(frame, '\n')
	if i < 0 {
		return nil, nil, false
	}
	return frame[:i], frame[i+1:], true
}

// SendResponse says where an accepted message went. ID is opaque (a UUID,
// Resend's shape); Seq is the message's id in its namespace.
type SendResponse struct {
	ID        string `json:"id"`
	Seq       int64  `json:"seq"`
	Namespace string `json:"namespace"`
	Replayed  bool   `json:"replayed,omitempty"`
	// Fault, when a rule of the trial's schedule matched, is what to do
	// (faults.go); ID is empty for a refusal or a timeout.
	Fault *Fault `json:"fault,omitempty"`
}

// BootstrapRequest carries the bootstrap token a site presented.
type BootstrapRequest struct {
	Token string `json:"token"`
}

// BootstrapResponse is the write coordinates minus the SMTP host, which
// only the writer knows. SMTPPort is the trial's own SMTP port where it has
// one (a shared writer), 0 where the writer's own port is the trial's.
type BootstrapResponse struct {
	Namespace  string `json:"namespace"`
	Capability string `json:"capability"`
	SMTPPort   int    `json:"smtp_port,omitempty"`
}

// ReadRequest selects messages. A gateway names the namespace and passes
// its caller's read capability; a shared inbox passes the inbox token of
// the page asked for as InboxToken; a trial-bound inbox leaves all three
// empty (its grant is bound to its trial).
type ReadRequest struct {
	Namespace  string `json:"namespace,omitempty"`
	Capability string `json:"capability,omitempty"`
	InboxToken string `json:"inbox_token,omitempty"`
	Recipient  string `json:"recipient,omitempty"`
	After      int64  `json:"after,omitempty"`   // only ids greater than this
	WaitMillis int64  `json:"wait_ms,omitempty"` // list/latest: hold until a match arrives
	ID         int64  `json:"id,omitempty"`      // get
	// Newest, on a list, asks for the newest page (counted back from the
	// newest message) instead of the oldest: the agent's HTML list, which
	// shows the newest mail first however much there is.
	Newest bool `json:"newest,omitempty"`
	// Door, from an inbox, is the door the agent read by: DoorInbox (the
	// HTML pages, also when empty), DoorInboxMCP (the MCP tools) or DoorIMAP. The
	// trail records the read under it. DoorInboxFrame is the HTML pages'
	// read of a message's HTML frame, which its page has just opened: the
	// trail records it at door inbox as a get, not a second open.
	Door string `json:"door,omitempty"`
}

// The agent's doors onto its mailbox, as the trail names them.
const (
	DoorInbox      = "inbox"
	DoorInboxMCP   = "inbox-mcp"
	DoorInboxFrame = "inbox-frame"
	// DoorIMAP is the mailbox over IMAP (package inboximap): its lists
	// carry each message's HTML part, from which a mail client is given
	// the message as a MIME entity; fetching a body is an open.
	DoorIMAP = "imap"
)

// Message is one stored message as the plane parsed it.
type Message struct {
	ID           int64  `json:"id"`
	UUID         string `json:"uuid"`
	Namespace    string `json:"namespace"`
	EnvelopeFrom string `json:"envelope_from"`
	// FromName is the display name the sender wrote in From, decoded and
	// cleaned; the address it goes with is always EnvelopeFrom.
	FromName    string       `json:"from_name,omitempty"`
	Recipients  []string     `json:"recipients"`
	Subject     string       `json:"subject"`
	Text        string       `json:"text"`
	HTML        string       `json:"html,omitempty"`
	Attachments []Attachment `json:"attachments"`
	// Inline are the inline images the HTML names by cid: (to show it
	// as sent); only the agent's inbox reads them.
	Inline   []InlineImage `json:"inline,omitempty"`
	Size     int           `json:"size"`
	Received time.Time     `json:"received"`
	// Opened, on the agent's reads, says the agent has opened the message
	// (an open in its trail): the inbox shows the others as unread.
	Opened bool `json:"opened,omitempty"`
	// Fault is "delay" or "duplicate" for a message a fault delivered
	// late or stored twice; the agent's inbox never sees it.
	Fault string `json:"fault,omitempty"`
	// Label is the evaluator's label of mail it planted (trial.plant),
	// sent to the gateway only. Planted carries it to the plane's own
	// trail for a read that must not see it (the inbox's); it never
	// travels.
	Label   string `json:"label,omitempty"`
	Planted string `json:"-"`
	// Found is what the plane's extractor found in the message when it
	// accepted it; the evaluator's reads are given it, the agent's not.
	Found *Found `json:"found,omitempty"`
	// HTMLText, on the agent's reads, is the text of the HTML part as a
	// person reads it, when it is not Text (the MCP tools show it).
	HTMLText string `json:"html_text,omitempty"`
	// Flags, on the agent's IMAP lists, are the flags it set (FlagRequest).
	Flags []string `json:"flags,omitempty"`
}

// Found is the codes and links found in a message (package otp's Extract,
// run when the plane accepted it).
type Found struct {
	OTP        string   `json:"otp,omitempty"`
	Codes      []string `json:"codes"`
	Links      []string `json:"links"`
	ActionLink string   `json:"action_link,omitempty"`
}

// InlineImage is one inline image part: its Content-ID (without <>), its
// media type and its decoded bytes.
type InlineImage struct {
	ContentID   string `json:"content_id"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"data"`
}

// Attachment is metadata of one attachment or inline part, with Mailpit's
// field names (the reference passes Mailpit's objects through verbatim).
type Attachment struct {
	Checksums   Checksums `json:"Checksums"`
	ContentID   string    `json:"ContentID"`
	ContentType string    `json:"ContentType"`
	FileName    string    `json:"FileName"`
	PartID      string    `json:"PartID"`
	Size        int       `json:"Size"`
}

// Checksums of an attachment's decoded content, lowercase hex.
type Checksums struct {
	MD5    string `json:"MD5"`
	SHA1   string `json:"SHA1"`
	SHA256 string `json:"SHA256"`
}

// ListResponse answers MethodList.
type ListResponse struct {
	Messages []Message `json:"messages"`
}

// TrialCreateRequest asks for a new trial. Namespace is minted when empty.
// AllowedSenders defaults by profile: the candidate sender for a candidate
// trial, anyone otherwise.
type TrialCreateRequest struct {
	Profile        string   `json:"profile"`
	Namespace      string   `json:"namespace,omitempty"`
	AllowedSenders []string `json:"allowed_senders,omitempty"`
	// BootstrapToken is minted when empty; a drop-in sidecar passes the
	// token its site was configured with (at least 32 characters).
	BootstrapToken string `json:"bootstrap_token,omitempty"`
	// Faults is the trial's first fault schedule (MethodTrialFaults).
	Faults json.RawMessage `json:"faults,omitempty"`
	// Webhooks are the trial's first webhooks (MethodTrialWebhooks).
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// Identity is everything minted for a trial, handed out once. Each party
// gets only its own part; see Identity.Parts.
type Identity struct {
	Namespace       string `json:"namespace"`
	Profile         string `json:"profile"`
	ReadCapability  string `json:"read_capability"`
	InboxToken      string `json:"inbox_token"`
	MailAPIToken    string `json:"mail_api_token"`
	BootstrapToken  string `json:"bootstrap_token"`
	WriteCapability string `json:"write_capability"`
	WriterGrant     string `json:"writer_grant"`
	InboxGrant      string `json:"inbox_grant"`
}

// TrialRequest names a trial by any of its namespaces.
type TrialRequest struct {
	Namespace string `json:"namespace"`
}

// TrialRotateRequest moves a trial to a fresh namespace; the previous one is
// sealed. Namespace is the trial; NewNamespace is minted when empty.
type TrialRotateRequest struct {
	Namespace    string `json:"namespace"`
	NewNamespace string `json:"new_namespace,omitempty"`
}

// RotateResponse is the trial's new namespace and read capability; its
// tokens and grants do not change.
type RotateResponse struct {
	Namespace      string `json:"namespace"`
	ReadCapability string `json:"read_capability"`
	Sealed         string `json:"sealed"`
}

// TrialInfo describes a trial without its secrets.
type TrialInfo struct {
	Namespace  string     `json:"namespace"` // current
	Profile    string     `json:"profile"`
	State      string     `json:"state"` // active or sealed
	Namespaces []string   `json:"namespaces"`
	Messages   int64      `json:"messages"`
	Bytes      int64      `json:"bytes"`
	Created    time.Time  `json:"created"`
	Expires    *time.Time `json:"expires,omitempty"`
	SMTPPort   int        `json:"smtp_port,omitempty"`
	// AgeMillis is how long the trial has been open; TTLMillis the TTL it
	// was opened with (none: 0). Plane is the identity of the plane that
	// serves its SMTP port (a PostgreSQL database may hold several).
	AgeMillis int64  `json:"age_ms"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Plane     string `json:"plane,omitempty"`
	// Faults is the trial's fault schedule (none: absent), and
	// FaultsInjected how many sends it has made go wrong.
	Faults         json.RawMessage `json:"faults,omitempty"`
	FaultsInjected int64           `json:"faults_injected,omitempty"`
	// Webhooks are the trial's webhooks, each URL without its
	// credentials.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// SealedReason says why the plane sealed the trial itself (one of the
	// Seal… reasons); empty for a trial the operator sealed or that takes
	// mail.
	SealedReason string `json:"sealed_reason,omitempty"`
}

// Why the plane seals a trial on a restart, in TrialInfo, the bundle and
// the seal event's code: the trial's result is void from then on.
const (
	// SealPortTaken: another process holds one of the trial's doors (its
	// SMTP port, or a door's port inside its network namespace), and a
	// candidate still configured with it would talk to that process.
	SealPortTaken = "port_taken"
	// SealNetnsChanged: the trial's netns path names another network
	// namespace than the one the trial was opened in.
	SealNetnsChanged = "netns_changed"
	// SealNetnsGone: the path names no network namespace any more.
	SealNetnsGone = "netns_gone"
	// SealDoorsUnbound: the trial's doors could not be bound again for
	// another reason (the log says which).
	SealDoorsUnbound = "doors_unbound"
)

// TrialListRequest pages MethodTrialList: trials created after the one
// named After (by its id in the list, Cursor), at most Limit of them.
type TrialListRequest struct {
	After int64 `json:"after,omitempty"`
	Limit int   `json:"limit,omitempty"`
}

// MaxTrialPage bounds one page of MethodTrialList.
const MaxTrialPage = 10000

// TrialListResponse answers MethodTrialList. Next is the After of the next
// page, 0 when this one is the last.
type TrialListResponse struct {
	Trials []TrialInfo `json:"trials"`
	Next   int64       `json:"next,omitempty"`
}

// TrialOpenRequest opens a trial on a running stack. TTLMillis > 0 makes
// the plane close it by itself that long after it opened.
type TrialOpenRequest struct {
	Profile   string `json:"profile,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	// Netns, a network namespace file (/proc/PID/ns/net, /run/netns/NAME),
	// has the supervisor bind the trial's candidate doors on that
	// namespace's loopback (NetnsDoor); the bundle then names them.
	Netns string `json:"netns,omitempty"`
	// AgentNetns, a network namespace file, has the supervisor bind the
	// agent's doors on that namespace's loopback: IMAP, where LOGIN is
	// taken without TLS (the kernel already separates), and the inbox's
	// pages and MCP; the bundle's InboxIMAP, InboxURL and InboxMCPURL then
	// name them.
	AgentNetns string `json:"agent_netns,omitempty"`
	// Faults is the trial's fault schedule (MethodTrialFaults).
	Faults json.RawMessage `json:"faults,omitempty"`
	// Webhooks are the trial's provider webhooks (MethodTrialWebhooks).
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// Bundle is what a harness needs of one trial on a stack of shared
// surfaces: exactly the trial part of mail-plane up --json.
type Bundle struct {
	Namespace            string            `json:"namespace"`
	CandidateEnvironment map[string]string `json:"candidate_environment"`
	InboxURL             string            `json:"inbox_url"`
	// InboxMCPURL is the same mailbox as an MCP server (streamable HTTP):
	// the inbox's origin and /mcp/{inbox token}.
	InboxMCPURL    string `json:"inbox_mcp_url"`
	APIURL         string `json:"api_url"`
	ReadCapability string `json:"read_capability"`
	SMTPPort       int    `json:"smtp_port"`
	WriterURL      string `json:"writer_url"`
	// TLS, where the writer serves it: the local CA's certificate to
	// trust, the implicit-TLS SMTP port (AUTH selects the trial there; the
	// SMTP ports also offer STARTTLS), and the HTTPS door.
	CAFile         string `json:"ca_file,omitempty"`
	SMTPTLSPort    int    `json:"smtp_tls_port,omitempty"`
	WriterHTTPSURL string `json:"writer_https_url,omitempty"`
	// EvidencePublicKey is the key the plane signs trails with:
	// mail-plane evidence verify --key.
	EvidencePublicKey string `json:"evidence_public_key,omitempty"`
	// Netns echoes the trial's network namespace: the candidate's
	// addresses above are valid inside it, and only there.
	Netns string `json:"netns,omitempty"`
	// Providers configure the SDKs of SendGrid, Postmark, Mailgun and
	// Amazon SES to send into this trial through the writer.
	Providers *Providers `json:"providers,omitempty"`
	// InboxIMAP is the same mailbox over IMAP, where the inbox serves it.
	InboxIMAP *InboxIMAP `json:"inbox_imap,omitempty"`
	// SealedReason, on a bundle up prints again after a restart, says why
	// the plane sealed the trial (rpc.SealPortTaken…): it takes no mail.
	SealedReason string `json:"sealed_reason,omitempty"`
}

// InboxIMAP is a trial's mailbox as a mail client's account: IMAP with
// STARTTLS on Port and implicit TLS on TLSPort, at Host, under a
// certificate of the CA in CAFile. Password is the trial's inbox token;
// any Username is accepted (this one is the namespace).
type InboxIMAP struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	TLSPort  int    `json:"tls_port"`
	Username string `json:"username"`
	Password string `json:"password"`
	CAFile   string `json:"ca_file"`
	// PlainLogin: the door is inside the agent's network namespace
	// (Port on its loopback, no TLS port): LOGIN needs no TLS there.
	PlainLogin bool `json:"plain_login,omitempty"`
}

// Providers are a trial's coordinates for the writer's provider-compatible
// send APIs (docs/providers.md): the first three take the trial's mail-API
// token; SES signs with the trial's own key pair, whose access key id is
// the trial's namespace.
type Providers struct {
	// Resend carries only the trial's webhook secret: POST /emails is
	// Resend's API (candidate_environment names it).
	Resend   ResendWebhook `json:"resend"`
	SendGrid ProviderToken `json:"sendgrid"`
	Postmark PostmarkToken `json:"postmark"`
	Mailgun  ProviderToken `json:"mailgun"`
	SES      SESKeys       `json:"ses"`
}

// ProviderToken is a base URL and an API key (SendGrid, Mailgun).
type ProviderToken struct {
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	// WebhookPublicKey (SendGrid: base64 DER of the trial's ECDSA P-256
	// public key) or WebhookSigningKey (Mailgun's HMAC key) verifies the
	// trial's webhooks (docs/webhooks.md).
	WebhookPublicKey  string `json:"webhook_public_key,omitempty"`
	WebhookSigningKey string `json:"webhook_signing_key,omitempty"`
}

// PostmarkToken is Postmark's base URL and server token.
type PostmarkToken struct {
	BaseURL     string `json:"base_url"`
	ServerToken string `json:"server_token"`
}

// SESKeys configure an SES v2 client: any region is accepted.
type SESKeys struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
}

// StackBundle is what mail-plane up --json prints: the first trial's
// bundle at the top (absent with --trials 0), every trial up opened, and
// what an operator or harness needs to open more on the running stack.
type StackBundle struct {
	*Bundle
	Trials         []Bundle `json:"trials"`
	PlaneSocket    string   `json:"plane_socket"`
	DataDir        string   `json:"data_dir"`
	AdminGrantFile string   `json:"admin_grant_file"`
	WriterURL      string   `json:"writer_url"`
	APIURL         string   `json:"api_url"`
	InboxBaseURL   string   `json:"inbox_base_url"`
	SharedSMTPPort int      `json:"shared_smtp_port"`
	// EvidencePublicKey is the plane's, also with no trial open.
	EvidencePublicKey string `json:"evidence_public_key,omitempty"`
	// ConsoleURL is the operator's console (mail-console): its pages and
	// /metrics need the admin grant.
	ConsoleURL string `json:"console_url,omitempty"`
	// BundleFile is where up keeps this bundle (0600, in its data
	// directory), for a harness that did not read up's output.
	BundleFile string `json:"bundle_file,omitempty"`
}

// PortsSyncRequest is one turn of the supervisor's loop: Add hands the
// plane ports that are bound and passed to the shared writer, ready to be
// given to new trials; the call then waits up to WaitMillis for work.
type PortsSyncRequest struct {
	Add []int `json:"add,omitempty"`
	// Closed acknowledges released ports whose listeners are closed.
	Closed     []int `json:"closed,omitempty"`
	WaitMillis int64 `json:"wait_ms,omitempty"`
	// Restore asks for the ports open trials own (Assigned): a new
	// supervisor's first call, to bind them again after a restart.
	Restore bool `json:"restore,omitempty"`
	// Unbound are ports of Assigned the supervisor could not bind again
	// (another process holds them): the plane seals their trials
	// (SealPortTaken), or with MoveTaken moves them to ports of Add,
	// before it answers.
	Unbound   []int `json:"unbound,omitempty"`
	MoveTaken bool  `json:"move_taken,omitempty"`
	// Doors reports the doors bound (or not: Error) since the last call;
	// DoorsClosed acknowledges CloseDoors.
	Doors       []NetnsDoor `json:"doors,omitempty"`
	DoorsClosed []string    `json:"doors_closed,omitempty"`
}

// PortsSyncResponse is the supervisor's work: bind Want more ports, and
// close the listeners of Release (their trials are closed). Assigned, on
// a call with Restore, lists the ports that open trials already own, to
// bind again after a restart.
type PortsSyncResponse struct {
	Want     int   `json:"want"`
	Release  []int `json:"release,omitempty"`
	Assigned []int `json:"assigned,omitempty"`
	// Doors are trials' doors to bind inside their network namespaces
	// (with Restore, also those open trials already own, at their ports);
	// CloseDoors are keys of closed trials' doors.
	Doors      []NetnsDoor `json:"doors,omitempty"`
	CloseDoors []string    `json:"close_doors,omitempty"`
}

// NetnsDoorHost is the address a trial's netns doors listen on inside
// its namespace: its loopback, which no other namespace reaches (an
// address of a container's bridge network would be reachable by the other
// containers on it).
const NetnsDoorHost = "127.0.0.1"

// NetnsDoor is one trial's candidate doors inside a network namespace: the
// mail API and bootstrap over HTTP, SMTP (STARTTLS where the writer has
// TLS) and implicit-TLS SMTP, on the namespace's loopback. The supervisor
// binds them and hands them to the shared writer under Key, which the
// writer presents with every plain SMTP message they carry (SendRequest's
// Door); the plane knows the key as the trial's. Key is no secret: only
// the shared writer presents it, as it presents a port.
type NetnsDoor struct {
	Key       string `json:"key"`
	Netns     string `json:"netns"`
	Namespace string `json:"namespace,omitempty"` // the trial's, for the log; empty on a new door
	// Ports inside the namespace: 0 asks for any free one.
	HTTPPort    int `json:"http_port,omitempty"`
	SMTPPort    int `json:"smtp_port,omitempty"`
	SMTPTLSPort int `json:"smtp_tls_port,omitempty"`
	// Error, in a report, says why nothing of the doors is served, and
	// Reason which Seal… reason that is.
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
	// NetnsDev and NetnsIno are the namespace file's identity: reported
	// when the doors are first bound, and asked for on a restart, where
	// the doors are bound only inside the same namespace.
	NetnsDev uint64 `json:"netns_dev,omitempty"`
	NetnsIno uint64 `json:"netns_ino,omitempty"`
	// Agent: the agent's doors, handed to the inbox (no candidate doors):
	// IMAP at IMAPPort, the pages and MCP at HTTPPort; its Key is the
	// trial's Namespace.
	Agent    bool `json:"agent,omitempty"`
	IMAPPort int  `json:"imap_port,omitempty"`
}

// GrantCreateRequest mints a grant for a role that is not bound to a trial.
type GrantCreateRequest struct {
	Role Role `json:"role"`
}

// GrantResponse carries a freshly minted grant.
type GrantResponse struct {
	Grant string `json:"grant"`
}

// EventsRequest reads a namespace's trail: events with a seq greater than
// After, at most Limit (0: a full page). A gateway passes its caller's
// read capability; WaitMillis holds the call until one commits.
type EventsRequest struct {
	Namespace  string `json:"namespace"`
	Capability string `json:"capability,omitempty"`
	After      int64  `json:"after,omitempty"`
	WaitMillis int64  `json:"wait_ms,omitempty"`
	Limit      int    `json:"limit,omitempty"`
}

// MaxEventPage bounds one page of events.
const MaxEventPage = 10000

// EventsResponse is a page of a trail: canonical lines (package
// evidence), in order. Closed is set when the trial is closed: its trail
// ends here.
type EventsResponse struct {
	Events []json.RawMessage `json:"events"`
	Closed bool              `json:"closed,omitempty"`
	// Head, on the last page of an export, is the trail's head signed by
	// the plane (package evidence's Head): the export's last line.
	Head json.RawMessage `json:"head,omitempty"`
}

// ReportRequest is the writer's report of SMTP sessions it refused before
// any message reached the plane: Count sessions on the listener of Port
// (a shared writer: the trial that owns it), with Code one of
// ReportCodes.
type ReportRequest struct {
	Port  int    `json:"port,omitempty"`
	Door  string `json:"door,omitempty"` // a netns door's key (NetnsDoor), instead of Port
	Code  string `json:"code"`
	Count int64  `json:"count"`
}

// ReportCodes are the refusals a writer reports.
var ReportCodes = []string{"connection_limit"}

// ClickRequest is the agent's click on link Link (from 0, in the order
// the inbox links them) of message ID, from the inbox's ping route. A
// shared inbox passes the token of the page, as for a read.
type ClickRequest struct {
	InboxToken string `json:"inbox_token,omitempty"`
	ID         int64  `json:"id"`
	Link       int    `json:"link"`
}

// FlagRequest sets (Set) or clears Flag on messages IDs of the mailbox
// the inbox token opens: the agent's STORE over IMAP.
type FlagRequest struct {
	InboxToken string  `json:"inbox_token,omitempty"`
	IDs        []int64 `json:"ids"`
	Flag       string  `json:"flag"`
	Set        bool    `json:"set"`
}

// The flags an agent may set (FlagRequest): RFC 3501's, as IMAP spells
// them.
const (
	FlagSeen    = `\Seen`
	FlagFlagged = `\Flagged`
)

// MaxFlagIDs bounds the messages of one FlagRequest.
const MaxFlagIDs = 1000

// PlantRequest is the evaluator planting a labelled message in a trial's
// current namespace: mail the agent cannot tell from the candidate's,
// which the gateway's JSON and the trail show with Label. From may carry
// a display name ("Bank <security@bank.example>"); it defaults to the
// trial's sender. To defaults to the recipients of the namespace's latest
// message. Planted mail does not count toward the quota.
type PlantRequest struct {
	Namespace string   `json:"namespace"`
	From      string   `json:"from,omitempty"`
	To        []string `json:"to,omitempty"`
	Subject   string   `json:"subject"`
	Text      string   `json:"text,omitempty"`
	HTML      string   `json:"html,omitempty"`
	Label     string   `json:"label"`
}

// PlantResponse is the planted message's id in its namespace.
type PlantResponse struct {
	ID int64 `json:"id"`
}

// Empty is the answer of methods that return nothing.
type Empty struct{}
