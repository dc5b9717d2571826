package engine

// Groups and the contact book (DESIGN.md section 16): groups live on the network (the session's
// client lists, creates and changes them); the contact book is the linked phone's records
// (section 14's, with LIDs and names); a number lookup on the network is counted against the
// session's daily bound.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// callTimeout bounds a network call through a session actor (its worker's own bound is the
// actor's IOTimeout, 30 s).
const callTimeout = 35 * time.Second

// ofUser is one of the user's sessions ("" = the default one).
func (s *Sessions) ofUser(uid, sessionID string) (*sessionEntry, error) {
	if sessionID == "" {
		if ent := s.idx.defaultOf(uid); ent != nil {
			return ent, nil
		}
		if ent := s.idx.cloudOf(uid); ent != nil {
			return ent, nil // a Cloud API number only: the operations it has (contacts; the rest are 400)
		}
		return nil, fmt.Errorf("%w: no session is assigned to this account; link one first", domain.ErrNotConnected)
	}
	if ent := s.idx.get(sessionID); ent != nil && ent.view.Load().AssignedTo == uid {
		return ent, nil
	}
	return nil, fmt.Errorf("%w: session %s is not assigned to this account", domain.ErrForbidden, sessionID)
}

// call runs fn with the network client of one of the user's sessions ("" = the default), which
// must be connected; checks numbers are counted against its daily lookups first.
func (s *Sessions) call(ctx context.Context, uid, sessionID string, checks int, fn func(context.Context, network.Client) error) error {
	ent, err := s.ofUser(uid, sessionID)
	if err != nil {
		return err
	}
	msg := &session.Call{Checks: checks, Fn: fn, Reply: make(chan session.Reply, 1)}
	_, err = ask(ctx, s.e, ent.pid, msg, msg.Reply, max(s.e.cfg.SessionTimeout, callTimeout), "session")
	return err
}

// Groups is the groups facet: the groups a session's phone is in, on the network.
type Groups struct{ e *Engine }

// Limits of a group (WhatsApp's).
const (
	groupNameMax        = 100
	groupParticipantMax = 256
)

// List lists the groups of one of the user's sessions ("" = the default).
func (g *Groups) List(ctx context.Context, uid, sessionID string) ([]domain.Group, error) {
	var out []domain.Group
	err := g.e.Sessions.call(ctx, uid, sessionID, 0, func(ctx context.Context, c network.Client) (err error) {
		out, err = c.Groups(ctx)
		return networkErr(err)
	})
	return out, err
}

// Create makes a group with the session's phone as its admin.
func (g *Groups) Create(ctx context.Context, uid, sessionID, name string, participants []string) (domain.Group, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > groupNameMax {
		return domain.Group{}, fmt.Errorf("%w: name is required, at most %d characters", domain.ErrValidation, groupNameMax)
	}
	phones, err := groupPhones("participants", participants, 1)
	if err != nil {
		return domain.Group{}, err
	}
	var out domain.Group
	err = g.e.Sessions.call(ctx, uid, sessionID, 0, func(ctx context.Context, c network.Client) (err error) {
		out, err = c.CreateGroup(ctx, name, phones)
		return networkErr(err)
	})
	return out, err
}

// Participants adds and removes participants of a group the session's phone administers.
func (g *Groups) Participants(ctx context.Context, uid, sessionID, id string, add, remove []string) (domain.Group, error) {
	if !domain.IsGroup(id) {
		return domain.Group{}, fmt.Errorf("%w: %s is not a group id", domain.ErrGroupNotFound, id)
	}
	if len(add)+len(remove) == 0 {
		return domain.Group{}, fmt.Errorf("%w: add or remove at least one participant", domain.ErrValidation)
	}
	a, err := groupPhones("add", add, 0)
	if err != nil {
		return domain.Group{}, err
	}
	r, err := groupPhones("remove", remove, 0)
	if err != nil {
		return domain.Group{}, err
	}
	var out domain.Group
	err = g.e.Sessions.call(ctx, uid, sessionID, 0, func(ctx context.Context, c network.Client) (err error) {
		out, err = c.UpdateParticipants(ctx, id, a, r)
		return networkErr(err)
	})
	return out, err
}

// Invite returns the link that joins a group the session's phone administers.
func (g *Groups) Invite(ctx context.Context, uid, sessionID, id string) (string, error) {
	if !domain.IsGroup(id) {
		return "", fmt.Errorf("%w: %s is not a group id", domain.ErrGroupNotFound, id)
	}
	var link string
	err := g.e.Sessions.call(ctx, uid, sessionID, 0, func(ctx context.Context, c network.Client) (err error) {
		link, err = c.InviteLink(ctx, id)
		return networkErr(err)
	})
	return link, err
}

// groupPhones normalises a list of numbers (at least min, at most groupParticipantMax).
func groupPhones(field string, in []string, least int) ([]string, error) {
	if len(in) < least || len(in) > groupParticipantMax {
		return nil, fmt.Errorf("%w: %s must hold %d to %d numbers", domain.ErrValidation, field, least, groupParticipantMax)
	}
	out := make([]string, 0, len(in))
	for _, p := range in {
		n, err := NormalizePhone(p)
		if err != nil {
			return nil, fmt.Errorf("%w (%s: %q)", err, field, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// networkErr maps a network call's error for the API: the port's definite refusals to the
// domain's, the rest kept (a domain error), or a 502.
func networkErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, network.ErrNotOnNetwork):
		return fmt.Errorf("%w: %w", domain.ErrRecipientNotOnNetwork, err)
	case errors.Is(err, network.ErrRateLimited):
		return fmt.Errorf("%w: the network asks the session to slow down: %w", domain.ErrUnavailable, err)
	case domain.CodeOf(err) != "":
		return err
	}
	return fmt.Errorf("%w: %w", domain.ErrNetwork, err)
}

// Contacts is the contact book facet: what a session's linked phone knows of the numbers it
// wrote to or heard from, and number lookups on the network.
type Contacts struct{ e *Engine }

// ContactsMaxLimit is the most contacts one page holds.
const ContactsMaxLimit = 1000

// ContactsCheckMax is the most numbers one lookup asks about.
const ContactsCheckMax = 50

// List returns a page of the contact book of one of the user's sessions ("" = the default), in
// number order, and the cursor of the next page ("" when this page is the last).
func (c *Contacts) List(uid, sessionID, cursor string, limit int) ([]domain.BookEntry, string, error) {
	if limit <= 0 {
		limit = 100
	}
	if limit > ContactsMaxLimit {
		return nil, "", fmt.Errorf("%w: limit must be 1 to %d", domain.ErrValidation, ContactsMaxLimit)
	}
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 || len(b) > 32 {
			return nil, "", domain.ErrBadCursor
		}
		after = string(b)
	}
	ent, err := c.e.Sessions.ofUser(uid, sessionID)
	if err != nil {
		return nil, "", err
	}
	phone := ent.view.Load().Phone
	if phone == "" {
		return []domain.BookEntry{}, "", nil // never linked: an empty book
	}
	page, err := c.e.Sessions.records.Book(ent.view.Load().ID, phone, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("%w: contact book: %w", domain.ErrUnavailable, err)
	}
	next := ""
	if len(page) > limit {
		page = page[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(page[limit-1].Number))
	}
	for i := range page {
		if page[i].LID == "" {
			page[i].LID = c.e.Messages.lids.get(page[i].Number)
		}
	}
	return page, next, nil
}

// Check asks the network which numbers (at most ContactsCheckMax) have an account, through one
// of the user's sessions, counted against its daily bound (domain.ContactsCheckPerDay).
func (c *Contacts) Check(ctx context.Context, uid, sessionID string, phones []string) ([]domain.NumberCheck, error) {
	if len(phones) == 0 || len(phones) > ContactsCheckMax {
		return nil, fmt.Errorf("%w: phones must hold 1 to %d numbers", domain.ErrValidation, ContactsCheckMax)
	}
	norm := make([]string, len(phones))
	for i, p := range phones {
		n, err := NormalizePhone(p)
		if err != nil {
			return nil, fmt.Errorf("%w (phones: %q)", err, p)
		}
		norm[i] = n
	}
	var out []domain.NumberCheck
	err := c.e.Sessions.call(ctx, uid, sessionID, len(norm), func(ctx context.Context, cl network.Client) (err error) {
		out, err = cl.Lookup(ctx, norm)
		return networkErr(err)
	})
	for _, r := range out {
		c.e.Messages.lids.put(r.Phone, r.LID)
	}
	return out, err
}
