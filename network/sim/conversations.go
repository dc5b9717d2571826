package sim

// Conversations on the sim (DESIGN.md section 16): every kind of message, replies, reactions,
// polls and their votes, edits, revokes, read marks, number lookups with LIDs, and groups. The
// phones of the sim act through Act (POST /api/dev/sim/inbound); what they received is in the
// deliveries (Messages folds edits and revokes into the messages they change).
//
// What the phones wrote (for quotes, their own edits and revokes, and read marks) and the
// groups are kept in conversations.jsonl in Dir, replayed at open like the other journals.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/google/uuid"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Errors of conversations (the HTTP layer maps them by their domain codes).
var (
	// ErrUnknownTarget: a reaction, vote, edit or revoke names a message the sim does not know
	// (or, for an edit or a revoke, one the phone did not write).
	ErrUnknownTarget = fmt.Errorf("%w: messageId names no message this phone can act on", domain.ErrMessageNotFound)
	// ErrBadVote: a vote for options the poll does not have, or for several in a single-choice
	// poll.
	ErrBadVote = fmt.Errorf("%w: options must be options of the poll (one, unless it allows several)", domain.ErrValidation)
	// ErrBadAct: an inbound act of an unknown type.
	ErrBadAct = fmt.Errorf("%w: type must be text, reaction, poll_vote, edit or revoke", domain.ErrValidation)
)

// lidOf is the sim's LID of a number: stable, like a real account's, and unlike its number.
// FNV-1a (64 bits) of "lid:" and the number, written out in decimal: each delivery's receipt
// carries one, and hash/fnv with fmt took two allocations (one now: the string) and 0.6 µs a
// message in the send path's profile; TestLidOf pins the values.
func lidOf(phone string) string {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for _, s := range [2]string{"lid:", phone} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	var b [20]byte
	return string(strconv.AppendUint(b[:0], 100_000_000_000_000+h%900_000_000_000_000, 10))
}

// wrote is a message one of the sim's phones wrote to a session.
type wrote struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	From    string `json:"from"`
	Group   string `json:"group,omitempty"`
	Kind    string `json:"kind"`
	Text    string `json:"text,omitempty"`
	Read    bool   `json:"read,omitempty"` // the session marked it read
}

// group is a group on the sim: its members' phones, which of them administer it.
type group struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Members map[string]bool `json:"members"` // phone → admin
	Invite  string          `json:"invite,omitempty"`
}

// convRecord is one line of conversations.jsonl.
type convRecord struct {
	Wrote *wrote `json:"wrote,omitempty"`
	Group *group `json:"group,omitempty"`
	Read  string `json:"read,omitempty"` // a message id marked read
}

// conversations is the sim's record of what its phones wrote, and its groups.
type conversations struct {
	mu     sync.Mutex
	log    *journal
	wrote  map[string]*wrote
	groups map[string]*group
}

func (cv *conversations) replay(n *Network) error {
	cv.wrote, cv.groups = map[string]*wrote{}, map[string]*group{}
	return cv.log.replay(n.log, func(_ int64, line []byte) error {
		var r convRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		switch {
		case r.Wrote != nil:
			cv.wrote[r.Wrote.ID] = r.Wrote
		case r.Group != nil:
			cv.groups[r.Group.ID] = r.Group
		case r.Read != "":
			if w := cv.wrote[r.Read]; w != nil {
				w.Read = true
			}
		}
		return nil
	})
}

// put appends a record. Called with mu held.
func (cv *conversations) put(r convRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("sim: encode: %w", err)
	}
	_, err = cv.log.append(append(b, '\n'))
	return err
}

// putGroup records g's new state. Called with mu held.
func (cv *conversations) putGroup(g *group) error {
	if err := cv.put(convRecord{Group: g}); err != nil {
		return err
	}
	cv.groups[g.ID] = g
	return nil
}

// memberGroup returns group id if phone is in it (ErrGroupNotFound otherwise). Called with mu
// held.
func (cv *conversations) memberGroup(id, phone string) (*group, error) {
	g := cv.groups[id]
	if g == nil {
		return nil, fmt.Errorf("sim: group %s: %w", id, domain.ErrGroupNotFound)
	}
	if _, ok := g.Members[phone]; !ok {
		return nil, fmt.Errorf("sim: %s is not in group %s: %w", phone, id, domain.ErrGroupNotFound)
	}
	return g, nil
}

// view is g as the port shows it to phone.
func (g *group) view(phone string) domain.Group {
	out := domain.Group{ID: g.ID, Name: g.Name, Admin: g.Members[phone], Participants: []domain.GroupMember{}}
	for p, admin := range g.Members {
		out.Participants = append(out.Participants, domain.GroupMember{Phone: p, LID: lidOf(p), Admin: admin})
	}
	slices.SortFunc(out.Participants, func(a, b domain.GroupMember) int { return strings.Compare(a.Phone, b.Phone) })
	return out
}

func (g *group) clone() *group {
	c := *g
	c.Members = make(map[string]bool, len(g.Members))
	for k, v := range g.Members {
		c.Members[k] = v
	}
	return &c
}

// newGroupID is a group id shaped like WhatsApp's (120363 and 12 more digits).
func newGroupID() string {
	b := make([]byte, 8)
	rand.Read(b)
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return fmt.Sprintf("120363%012d%s", v%1e12, domain.GroupSuffix)
}

// delivery makes the record of m sent from phone, checking what the kind needs.
func (n *Network) delivery(from string, m domain.Message) (domain.Delivered, error) {
	d := domain.Delivered{ID: m.ID, From: from, To: m.To, Type: string(m.Kind), Typing: m.Typing}
	switch m.Kind {
	case domain.KindText:
		d.Text = m.Text
	case domain.KindImage, domain.KindVideo, domain.KindAudio, domain.KindDocument, domain.KindSticker:
		d.Caption, d.FileName, d.MimeType, d.Bytes, d.PTT = m.Caption, m.FileName, m.MimeType, len(m.Data), m.PTT
		if m.Kind == domain.KindSticker && m.MimeType != "image/webp" {
			return d, fmt.Errorf("sim: a sticker must be WebP, not %q: %w", m.MimeType, network.ErrUnsupported)
		}
	case domain.KindLocation:
		d.Lat, d.Lng, d.Address, d.LocationName = &m.Lat, &m.Lng, m.Address, m.LocationName
	case domain.KindContact:
		d.ContactName, d.ContactPhone = m.ContactName, m.ContactPhone
	case domain.KindPoll:
		if len(m.Options) < domain.PollMinOptions || len(m.Options) > domain.PollMaxOptions || m.Question == "" {
			return d, fmt.Errorf("sim: a poll needs a question and 2 to 12 options: %w", network.ErrUnsupported)
		}
		d.Question, d.Options, d.Multiple = m.Question, m.Options, m.Multiple
	case domain.KindReaction, domain.KindEdit, domain.KindRevoke:
		if m.Target == nil || m.Target.ID == "" {
			return d, fmt.Errorf("sim: %s without a target: %w", m.Kind, network.ErrUnsupported)
		}
		d.Target, d.Emoji = m.Target.ID, m.Emoji
		if m.Kind == domain.KindEdit {
			d.Text = m.Text
		}
		if m.Kind != domain.KindReaction {
			// Only what this phone sent to this chat can be edited or revoked.
			t, ok, err := n.deliveries.record(m.Target.ID)
			if err != nil {
				return d, err
			}
			if !ok || t.From != from || t.To != m.To {
				return d, fmt.Errorf("sim: %s of %s, which %s did not send to %s: %w", m.Kind, m.Target.ID, from, m.To, network.ErrUnsupported)
			}
		}
	default:
		return d, fmt.Errorf("sim: kind %q: %w", m.Kind, network.ErrUnsupported)
	}
	if m.ReplyTo != nil {
		d.ReplyTo, d.Quoted = m.ReplyTo.ID, m.ReplyTo.Text
	}
	if domain.IsGroup(m.To) {
		n.conv.mu.Lock()
		_, err := n.conv.memberGroup(m.To, from)
		n.conv.mu.Unlock()
		if err != nil {
			return d, err
		}
		d.Group = m.To
	}
	return d, nil
}

// reachable tells whether to can receive messages: a group the sender is in (checked when the
// delivery is made), or a number on the network.
func (n *Network) reachable(to string) bool { return domain.IsGroup(to) || n.registered(to) }

// typing waits while the recipient sees "typing…" (m.Typing).
func (n *Network) typing(ctx context.Context, m domain.Message) error {
	if !m.Typing {
		return nil
	}
	t := time.NewTimer(network.TypingFor(m))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return errClosed
	}
}

// Lookup tells which numbers are on the sim, with their LIDs; it needs a connected device.
func (c *client) Lookup(ctx context.Context, phones []string) ([]domain.NumberCheck, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := c.online(); !ok {
		return nil, domain.ErrNotConnected
	}
	out := make([]domain.NumberCheck, len(phones))
	for i, p := range phones {
		p = normalizePhone(p)
		out[i] = domain.NumberCheck{Phone: p, OnNetwork: c.n.registered(p)}
		if out[i].OnNetwork {
			out[i].LID = lidOf(p)
		}
	}
	return out, nil
}

// MarkRead marks a message a phone wrote to this session as read (Reads shows it).
func (c *client) MarkRead(ctx context.Context, ref domain.MessageRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := c.online(); !ok {
		return domain.ErrNotConnected
	}
	cv := &c.n.conv
	cv.mu.Lock()
	defer cv.mu.Unlock()
	w := cv.wrote[ref.ID]
	if w == nil || w.Session != c.session {
		return fmt.Errorf("sim: mark %s read: %w", ref.ID, ErrUnknownMessage)
	}
	if w.Read {
		return nil
	}
	if err := cv.put(convRecord{Read: ref.ID}); err != nil {
		return err
	}
	w.Read = true
	return nil
}

// Groups lists the groups the session's phone is in, by name.
func (c *client) Groups(ctx context.Context) ([]domain.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	phone, ok := c.online()
	if !ok {
		return nil, domain.ErrNotConnected
	}
	return c.n.groupsOf(phone), nil
}

func (n *Network) groupsOf(phone string) []domain.Group {
	n.conv.mu.Lock()
	defer n.conv.mu.Unlock()
	out := []domain.Group{}
	for _, g := range n.conv.groups {
		if _, ok := g.Members[phone]; ok {
			out = append(out, g.view(phone))
		}
	}
	slices.SortFunc(out, func(a, b domain.Group) int {
		return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID)
	})
	return out
}

// checkMembers normalises numbers and refuses one that is not on the sim.
func (n *Network) checkMembers(phones []string) ([]string, error) {
	out := make([]string, 0, len(phones))
	for _, p := range phones {
		p = normalizePhone(p)
		if !n.registered(p) {
			return nil, fmt.Errorf("sim: %s: %w", p, network.ErrNotOnNetwork)
		}
		out = append(out, p)
	}
	return out, nil
}

// CreateGroup makes a group with the session's phone as its admin.
func (c *client) CreateGroup(ctx context.Context, name string, participants []string) (domain.Group, error) {
	if err := ctx.Err(); err != nil {
		return domain.Group{}, err
	}
	phone, ok := c.online()
	if !ok {
		return domain.Group{}, domain.ErrNotConnected
	}
	members, err := c.n.checkMembers(participants)
	if err != nil {
		return domain.Group{}, err
	}
	g := &group{ID: newGroupID(), Name: name, Members: map[string]bool{phone: true}}
	for _, p := range members {
		if p != phone {
			g.Members[p] = false
		}
	}
	cv := &c.n.conv
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if err := cv.putGroup(g); err != nil {
		return domain.Group{}, err
	}
	return g.view(phone), nil
}

// adminPhone is the session's phone, to act on groups it administers.
func (c *client) adminPhone(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	phone, ok := c.online()
	if !ok {
		return "", domain.ErrNotConnected
	}
	return phone, nil
}

// administered returns group id if phone administers it. Called with conv.mu held.
func (cv *conversations) administered(id, phone string) (*group, error) {
	g, err := cv.memberGroup(id, phone)
	if err != nil {
		return nil, err
	}
	if !g.Members[phone] {
		return nil, fmt.Errorf("sim: group %s: %w", id, domain.ErrNotGroupAdmin)
	}
	return g, nil
}

// UpdateParticipants adds and removes members of a group the session's phone administers.
func (c *client) UpdateParticipants(ctx context.Context, id string, add, remove []string) (domain.Group, error) {
	phone, err := c.adminPhone(ctx)
	if err != nil {
		return domain.Group{}, err
	}
	added, err := c.n.checkMembers(add)
	if err != nil {
		return domain.Group{}, err
	}
	cv := &c.n.conv
	cv.mu.Lock()
	defer cv.mu.Unlock()
	g, err := cv.administered(id, phone)
	if err != nil {
		return domain.Group{}, err
	}
	next := g.clone()
	for _, p := range added {
		if _, in := next.Members[p]; !in {
			next.Members[p] = false
		}
	}
	for _, p := range remove {
		if p = normalizePhone(p); p != phone {
			delete(next.Members, p)
		}
	}
	if err := cv.putGroup(next); err != nil {
		return domain.Group{}, err
	}
	return next.view(phone), nil
}

// InviteLink returns the link that joins a group the session's phone administers.
func (c *client) InviteLink(ctx context.Context, id string) (string, error) {
	phone, err := c.adminPhone(ctx)
	if err != nil {
		return "", err
	}
	cv := &c.n.conv
	cv.mu.Lock()
	defer cv.mu.Unlock()
	g, err := cv.administered(id, phone)
	if err != nil {
		return "", err
	}
	if g.Invite == "" {
		b := make([]byte, 16)
		rand.Read(b)
		next := g.clone()
		next.Invite = base64.RawURLEncoding.EncodeToString(b)[:22]
		if err := cv.putGroup(next); err != nil {
			return "", err
		}
		g = next
	}
	return "https://chat.whatsapp.com/" + g.Invite, nil
}

// Groups is GET /api/dev/sim/groups?sessionId=: the groups the session's phone is in.
func (n *Network) Groups(sessionID string) ([]domain.Group, error) {
	n.mu.Lock()
	phone, ok := n.pairings[sessionID]
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sim: session %q is not linked: %w", sessionID, ErrUnknownSession)
	}
	return n.groupsOf(phone), nil
}

// Reads lists the ids of the messages from a number that a session marked read.
func (n *Network) Reads(from string) []string {
	from = normalizePhone(from)
	n.conv.mu.Lock()
	defer n.conv.mu.Unlock()
	out := []string{}
	for id, w := range n.conv.wrote {
		if w.From == from && w.Read {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Inbound is a customer writing text to the session's number (Act with a text).
func (n *Network) Inbound(sessionID, from, text string) (string, error) {
	return n.Act(sessionID, domain.SimInbound{From: from, Text: text})
}

// Act is a phone acting on a session (POST /api/dev/sim/inbound): it writes to it (quoting
// ReplyTo when given), reacts, votes in a poll, or edits or revokes a message it wrote; in a
// direct conversation or in a group both are in. The session hears the event (Incoming,
// Reaction, PollVote, Edited, Revoked) with a new message id, which Act returns. The session must
// be connected (domain.ErrNotConnected otherwise; the real network would hold the event until
// the device connects, which the sim does not model).
func (n *Network) Act(sessionID string, in domain.SimInbound) (string, error) {
	from := normalizePhone(in.From)
	if !validPhone(from) {
		return "", ErrBadPhone
	}
	typ := in.Type
	if typ == "" {
		typ = domain.SimText
	}
	c, err := n.client(sessionID)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != online {
		return "", fmt.Errorf("sim: session %s is not connected: %w", sessionID, domain.ErrNotConnected)
	}
	id := "SIMIN" + strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", ""))[:20]
	o := network.Origin{ID: id, From: from, FromLID: lidOf(from), PushName: "Customer " + from[len(from)-4:],
		At: time.Now().UTC().Truncate(time.Millisecond)}
	cv := &n.conv
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if in.Group != "" {
		g, err := cv.memberGroup(in.Group, from)
		if err == nil {
			_, err = cv.memberGroup(in.Group, c.phone)
		}
		if err != nil {
			return "", err
		}
		o.Group = g.ID
	}
	var ev network.Event
	switch typ {
	case domain.SimText:
		if strings.TrimSpace(in.Text) == "" {
			return "", ErrEmptyText
		}
		m := domain.Message{ID: id, To: c.phone, Kind: domain.KindText, Text: in.Text}
		if in.ReplyTo != "" {
			ref, err := n.refOf(c.phone, in.ReplyTo)
			if err != nil {
				return "", err
			}
			m.ReplyTo = &ref
		}
		if err := cv.put(convRecord{Wrote: &wrote{ID: id, Session: sessionID, From: from, Group: o.Group, Kind: string(m.Kind), Text: in.Text}}); err != nil {
			return "", err
		}
		cv.wrote[id] = &wrote{ID: id, Session: sessionID, From: from, Group: o.Group, Kind: string(m.Kind), Text: in.Text}
		ev = network.Incoming{Origin: o, Message: m}
	case domain.SimReaction:
		if _, err := n.refOf(c.phone, in.MessageID); err != nil {
			return "", err
		}
		ev = network.Reaction{Origin: o, Target: in.MessageID, Emoji: in.Emoji}
	case domain.SimPollVote:
		poll, ok, err := n.deliveries.record(in.MessageID)
		if err != nil {
			return "", err
		}
		// Only who got the poll votes: its recipient, or a member of its group.
		if !ok || poll.Type != string(domain.KindPoll) || poll.From != c.phone {
			return "", ErrUnknownTarget
		}
		if poll.Group == "" && poll.To != from {
			return "", ErrUnknownTarget
		}
		if poll.Group != "" {
			if _, err := cv.memberGroup(poll.Group, from); err != nil {
				return "", ErrUnknownTarget
			}
			o.Group = poll.Group
		}
		if (!poll.Multiple && len(in.Options) > 1) || slices.ContainsFunc(in.Options, func(o string) bool { return !slices.Contains(poll.Options, o) }) {
			return "", ErrBadVote
		}
		ev = network.PollVote{Origin: o, Poll: in.MessageID, Options: slices.Clone(in.Options)}
	case domain.SimEdit, domain.SimRevoke:
		w := cv.wrote[in.MessageID]
		if w == nil || w.From != from || w.Session != sessionID {
			return "", ErrUnknownTarget
		}
		if typ == domain.SimRevoke {
			ev = network.Revoked{Origin: o, Target: in.MessageID}
			break
		}
		if strings.TrimSpace(in.Text) == "" {
			return "", ErrEmptyText
		}
		next := *w
		next.Text = in.Text
		if err := cv.put(convRecord{Wrote: &next}); err != nil {
			return "", err
		}
		cv.wrote[next.ID] = &next
		ev = network.Edited{Origin: o, Target: in.MessageID, Message: domain.Message{ID: in.MessageID, To: c.phone, Kind: domain.KindText, Text: in.Text}}
	default:
		return "", ErrBadAct
	}
	if o.Group == "" {
		n.rules.wroteTo(c.phone, from)
	}
	c.emit(ev)
	return id, nil
}

// refOf is how the phone of a session (phone) sees message id: one it sent (delivered by the
// sim) or one a phone wrote to it. Called with conv.mu held.
func (n *Network) refOf(phone, id string) (domain.MessageRef, error) {
	if w := n.conv.wrote[id]; w != nil {
		return domain.MessageRef{ID: id, From: w.From, FromLID: lidOf(w.From), Group: w.Group, Kind: domain.Kind(w.Kind), Text: w.Text}, nil
	}
	d, ok, err := n.deliveries.record(id)
	if err != nil {
		return domain.MessageRef{}, err
	}
	if !ok {
		return domain.MessageRef{}, ErrUnknownTarget
	}
	ref := domain.MessageRef{ID: id, Group: d.Group, Kind: domain.Kind(d.Type), Text: cmp.Or(d.Text, d.Caption, d.Question, d.LocationName, d.Address, d.ContactName)}
	if d.From == phone {
		ref.FromMe = true
	} else {
		ref.From, ref.FromLID = d.From, lidOf(d.From)
	}
	return ref, nil
}
