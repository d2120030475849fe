package inboximap

import (
	"context"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/backend"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// inboxName is the one mailbox.
const inboxName = "INBOX"

// Refusals of what would change or remove mail: NO, with the reason.
var (
	errReadOnly   = errors.New("this mailbox is read-only: mail cannot be added, copied, moved or removed")
	errNoMailbox  = errors.New("only INBOX exists here")
	errFlags      = errors.New(`only \Seen and \Flagged may be set`)
	errUnavail    = errors.New("the mailbox is unavailable; try again shortly")
	errBug        = errors.New("the server failed to answer this command")
	errNoMessages = errors.New("no such message")
)

// user is one logged-in connection's mailbox owner: a trial, by the
// namespace the plane resolved its token to.
type user struct {
	srv   *Server
	c     *conn
	token string
	ns    string
}

// Username is the trial's namespace, never its token.
func (u *user) Username() string { return u.ns }

func (u *user) ListMailboxes(subscribed bool) ([]backend.Mailbox, error) {
	return []backend.Mailbox{u.mailbox()}, nil
}

func (u *user) GetMailbox(name string) (backend.Mailbox, error) {
	if !isInbox(name) {
		return nil, errNoMailbox
	}
	return u.mailbox(), nil
}

func (u *user) mailbox() *mailbox { return &mailbox{u: u} }

func (u *user) CreateMailbox(string) error         { return errReadOnly }
func (u *user) DeleteMailbox(string) error         { return errReadOnly }
func (u *user) RenameMailbox(string, string) error { return errReadOnly }
func (u *user) Logout() error                      { return nil }

// isInbox: INBOX is case-insensitive (RFC 3501 §5.1).
func isInbox(name string) bool { return strings.EqualFold(name, inboxName) }

// mailbox is INBOX as one connection sees it: the messages it has been
// shown, in order, numbered from 1 (mail is never removed, so a number
// stays its message's).
type mailbox struct {
	u     *user
	mu    sync.Mutex
	items []*item
	told  int // the count the client was last told (SELECT's, an EXISTS)
}

func (mb *mailbox) Name() string { return inboxName }

func (mb *mailbox) Info() (*imap.MailboxInfo, error) {
	return &imap.MailboxInfo{Delimiter: "/", Name: inboxName}, nil
}

// uidValidity is fixed per trial: the namespace's, whose ids the UIDs
// are (a rotation starts a namespace, and its ids, anew).
func (mb *mailbox) uidValidity() uint32 { return crc32.ChecksumIEEE([]byte(mb.u.ns)) | 1 }

func (mb *mailbox) Status(items []imap.StatusItem) (*imap.MailboxStatus, error) {
	if err := mb.refresh(); err != nil {
		return nil, err
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	st := imap.NewMailboxStatus(inboxName, items)
	st.Flags = []string{imap.SeenFlag, imap.FlaggedFlag}
	st.PermanentFlags = []string{imap.SeenFlag, imap.FlaggedFlag}
	for _, name := range items {
		switch name {
		case imap.StatusMessages:
			st.Messages = uint32(len(mb.items))
			mb.told = len(mb.items)
		case imap.StatusUidNext:
			st.UidNext = 1
			if n := len(mb.items); n > 0 {
				st.UidNext = mb.items[n-1].uid + 1
			}
		case imap.StatusUidValidity:
			st.UidValidity = mb.uidValidity()
		case imap.StatusRecent:
			st.Recent = 0
		case imap.StatusUnseen:
			// STATUS says how many; SELECT, the first one's number.
			for i, it := range slices.Backward(mb.items) {
				if !slices.Contains(it.flags(), imap.SeenFlag) {
					st.Unseen++
					st.UnseenSeqNum = uint32(i + 1)
				}
			}
		}
	}
	return st, nil
}

func (mb *mailbox) SetSubscribed(bool) error { return nil }
func (mb *mailbox) Check() error             { return nil }

// Poll (NOOP) takes in mail that arrived since the view was last read,
// and tells the client.
func (mb *mailbox) Poll() error {
	if err := mb.refresh(); err != nil {
		return err
	}
	mb.tell()
	return nil
}

// catchUp takes in mail the trial's watcher has counted and tells the
// client: before a SEARCH's answer, and as IDLE begins. (Not from
// ListMessages, which runs while its FETCH answer is being written.)
func (mb *mailbox) catchUp() error {
	if err := mb.refreshIfBehind(); err != nil {
		return err
	}
	mb.tell()
	return nil
}

// tell sends EXISTS if the view holds more than the client was told.
func (mb *mailbox) tell() {
	mb.mu.Lock()
	n, grown := len(mb.items), len(mb.items) > mb.told
	mb.told = max(mb.told, n)
	mb.mu.Unlock()
	if grown {
		mb.u.c.exists(n)
	}
}

// refresh reads the mail the view has not shown yet (all of it, the
// first time), page by page.
func (mb *mailbox) refresh() error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	for {
		var after int64
		if n := len(mb.items); n > 0 {
			after = int64(mb.items[n-1].uid)
		}
		msgs, err := mb.u.srv.list(mb.u, after)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		for _, m := range msgs {
			if m.ID <= after || m.ID > math.MaxUint32 {
				return nil // ids past what a UID can say: not shown
			}
			mb.items = append(mb.items, newItem(m))
		}
	}
}

// selected returns the messages seqset names (by UID with uid), with
// their numbers.
func (mb *mailbox) selected(uid bool, seqset *imap.SeqSet) (seqs []uint32, items []*item) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	n := len(mb.items)
	if n == 0 {
		return nil, nil
	}
	// RFC 3501 §6.4.8: "*" is the largest number (or UID) in use; a set
	// is walked by the view, not by the numbers it spells.
	last := uint32(n)
	if uid {
		last = mb.items[n-1].uid
	}
	for i, it := range mb.items {
		key := uint32(i + 1)
		if uid {
			key = it.uid
		}
		if contains(seqset, key, last) {
			seqs, items = append(seqs, uint32(i+1)), append(items, it)
		}
	}
	return seqs, items
}

func contains(s *imap.SeqSet, key, last uint32) bool {
	for _, q := range s.Set {
		start, stop := q.Start, q.Stop
		if start == 0 {
			start = last
		}
		if stop == 0 {
			stop = last
		}
		if start > stop {
			start, stop = stop, start
		}
		if start <= key && key <= stop {
			return true
		}
	}
	return false
}

func (mb *mailbox) ListMessages(uid bool, seqset *imap.SeqSet, items []imap.FetchItem, ch chan<- *imap.Message) error {
	defer close(ch)
	if err := mb.refreshIfBehind(); err != nil {
		return err
	}
	seqs, its := mb.selected(uid, seqset)
	body := readsBody(items)
	for i, it := range its {
		if body {
			// Reading a body is an open, on the record at door imap;
			// what the plane answers is what is shown.
			m, err := mb.u.srv.get(mb.u, int64(it.uid))
			if err != nil {
				return err
			}
			fresh := newItem(m)
			fresh.opened = true
			mb.mu.Lock()
			*it = *fresh
			mb.mu.Unlock()
		}
		mb.mu.Lock()
		m, err := it.fetch(seqs[i], items)
		mb.mu.Unlock()
		if err != nil {
			return err
		}
		ch <- m
	}
	return nil
}

// refreshIfBehind reads new mail when the trial's watcher has seen more
// than the view holds (an EXISTS the client was told of may be fetched).
func (mb *mailbox) refreshIfBehind() error {
	mb.mu.Lock()
	n := len(mb.items)
	mb.mu.Unlock()
	if n == 0 || mb.u.srv.seen(mb.u.ns) > n {
		return mb.refresh()
	}
	return nil
}

func (mb *mailbox) SearchMessages(uid bool, c *imap.SearchCriteria) ([]uint32, error) {
	if err := mb.catchUp(); err != nil {
		return nil, err
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	var out []uint32
	for i, it := range mb.items {
		ok, err := it.match(uint32(i+1), c)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if uid {
			out = append(out, it.uid)
		} else {
			out = append(out, uint32(i+1))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func (mb *mailbox) CreateMessage([]string, time.Time, imap.Literal) error { return errReadOnly }

// UpdateMessagesFlags sets or clears \Seen and \Flagged through the
// plane, which keeps them per trial; \Deleted and any other flag are
// refused, changing nothing. A message read stays \Seen: that is the
// plane's record of the agent's opens, which only a read adds to.
func (mb *mailbox) UpdateMessagesFlags(uid bool, seqset *imap.SeqSet, op imap.FlagsOp, flags []string) error {
	for _, f := range flags {
		if f == imap.DeletedFlag {
			return errReadOnly
		}
		if f != imap.SeenFlag && f != imap.FlaggedFlag {
			return errFlags
		}
	}
	_, its := mb.selected(uid, seqset)
	if len(its) == 0 {
		return nil
	}
	ids := make([]int64, len(its))
	for i, it := range its {
		ids[i] = int64(it.uid)
	}
	for _, f := range []string{imap.SeenFlag, imap.FlaggedFlag} {
		listed := slices.Contains(flags, f)
		on := op != imap.RemoveFlags
		if !listed && op != imap.SetFlags {
			continue
		}
		if op == imap.SetFlags {
			on = listed
		}
		for chunk := range slices.Chunk(ids, rpc.MaxFlagIDs) {
			if err := mb.u.srv.flag(mb.u, chunk, f, on); err != nil {
				return err
			}
		}
		mb.mu.Lock()
		for _, it := range its {
			it.setFlag(f, on)
		}
		mb.mu.Unlock()
	}
	return nil
}

func (mb *mailbox) CopyMessages(bool, *imap.SeqSet, string) error { return errReadOnly }
func (mb *mailbox) MoveMessages(bool, *imap.SeqSet, string) error { return errReadOnly }
func (mb *mailbox) Expunge() error                                { return errReadOnly }

// list and get are the plane's reads for u, at door imap: a refusal ends
// u's connection (its trial closed, or its token no longer opens it).
func (s *Server) list(u *user, after int64) ([]rpc.Message, error) {
	ctx, cancel := context.WithTimeout(s.ctx, planeTimeout)
	defer cancel()
	msgs, err := s.plane.List(ctx, &rpc.ReadRequest{InboxToken: u.token, After: after, Door: rpc.DoorIMAP})
	return msgs, s.planeErr(u, err)
}

func (s *Server) flag(u *user, ids []int64, flag string, on bool) error {
	ctx, cancel := context.WithTimeout(s.ctx, planeTimeout)
	defer cancel()
	err := s.plane.Flag(ctx, &rpc.FlagRequest{InboxToken: u.token, IDs: ids, Flag: flag, Set: on})
	if rpc.CodeOf(err) == rpc.CodeNotFound {
		return errNoMessages
	}
	return s.planeErr(u, err)
}

func (s *Server) get(u *user, id int64) (rpc.Message, error) {
	ctx, cancel := context.WithTimeout(s.ctx, planeTimeout)
	defer cancel()
	m, err := s.plane.Get(ctx, &rpc.ReadRequest{InboxToken: u.token, ID: id, Door: rpc.DoorIMAP})
	if rpc.CodeOf(err) == rpc.CodeNotFound {
		// No such message, or no trial: the next read tells which.
		return m, errNoMessages
	}
	return m, s.planeErr(u, err)
}

// The IMAP door's one table from a plane error's class and code to its
// answer (docs/rpc.md, "Errors"): the plane refuses a token that opens
// nothing now (the trial closed, or its token was rotated away) with
// not_found, and the connection ends; an outage is a NO that keeps the
// connection; anything else is a bug, logged, and a NO naming nothing.
type answer int

const (
	answerGone    answer = iota + 1 // the token opens nothing now
	answerUnavail                   // the plane or its store cannot answer now
	answerBug                       // a bug: the plane's or this door's
)

var answers = rpc.Answers[answer]{
	Refused: map[string]answer{rpc.CodeNotFound: answerGone},
	Outage:  answerUnavail,
	Bug:     answerBug,
}

// planeErr answers a failed read by the table: an outage is
// errUnavail (the connection stays), a bug errBug (logged), and a token
// that opens nothing now ends the connection.
func (s *Server) planeErr(u *user, err error) error {
	if err == nil {
		return nil
	}
	switch a, _ := answers.For(err); a {
	case answerUnavail:
		s.log.Warn().Str("code", rpc.CodeOf(err)).Msg("imap: plane unavailable")
		return errUnavail
	case answerGone:
		s.known.Forget(u.token)
		u.c.end()
		return errUnavail
	default:
		s.log.Error().Str("code", rpc.CodeOf(err)).Msg("imap: the plane failed the inbox's read")
		return errBug
	}
}
