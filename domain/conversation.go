package domain

import (
	"slices"
	"time"
)

// Conversations (DESIGN.md section 16): what happened to a message after it was written, as
// the history and the dashboard show it beside the message: reactions, an edit, a revoke, poll
// votes. Kept per (user, message) for as long as the message (7 days).

// MessageNotes is what happened to one message after it was written.
type MessageNotes struct {
	// Reactions: one per reactor (a later reaction replaces an earlier one; "" removes it).
	Reactions []Reaction `json:"reactions,omitempty"`
	// Edit: the message's text as last edited (nil: never edited).
	Edit *Edit `json:"edit,omitempty"`
	// Revoked: the message was deleted for everyone (nil: it was not).
	Revoked *Revocation `json:"revoked,omitempty"`
	// Votes: a poll's votes, one per voter (a later vote replaces an earlier one).
	Votes []Vote `json:"votes,omitempty"`
}

// Reaction is one person's reaction to a message.
type Reaction struct {
	From   string `json:"from,omitempty"` // the reactor's phone ("" for the session itself)
	LID    string `json:"lid,omitempty"`
	FromMe bool   `json:"fromMe,omitempty"`
	Emoji  string `json:"emoji"`
	At     Millis `json:"at"`
}

// Edit is a message's text as its sender last changed it.
type Edit struct {
	Text   string `json:"text"`
	FromMe bool   `json:"fromMe,omitempty"`
	At     Millis `json:"at"`
}

// Revocation records that a message was deleted for everyone.
type Revocation struct {
	FromMe bool   `json:"fromMe,omitempty"`
	At     Millis `json:"at"`
}

// Vote is one voter's choice in a poll (no options: the vote was taken back).
type Vote struct {
	Voter   string   `json:"voter"` // the voter's phone (or LID when the network hides the phone)
	LID     string   `json:"lid,omitempty"`
	Options []string `json:"options"`
	At      Millis   `json:"at"`
}

// React records r, unless the reactor's reaction on record is newer; an empty emoji takes the
// reactor's reaction back. It reports whether anything changed.
func (n *MessageNotes) React(r Reaction) bool {
	i := slices.IndexFunc(n.Reactions, func(o Reaction) bool { return o.sameReactor(r) })
	if i >= 0 && n.Reactions[i].At > r.At {
		return false
	}
	switch {
	case i >= 0 && r.Emoji == "":
		n.Reactions = slices.Delete(n.Reactions, i, i+1)
	case i >= 0:
		n.Reactions[i] = r
	case r.Emoji != "":
		n.Reactions = append(n.Reactions, r)
	default:
		return false
	}
	return true
}

func (r Reaction) sameReactor(o Reaction) bool {
	if r.FromMe || o.FromMe {
		return r.FromMe == o.FromMe
	}
	return (r.From != "" && r.From == o.From) || (r.LID != "" && r.LID == o.LID)
}

// SetEdit records an edit unless a newer one is on record.
func (n *MessageNotes) SetEdit(e Edit) bool {
	if n.Edit != nil && n.Edit.At > e.At {
		return false
	}
	n.Edit = &e
	return true
}

// Revoke records that the message was deleted for everyone (the first time counts).
func (n *MessageNotes) Revoke(r Revocation) bool {
	if n.Revoked != nil {
		return false
	}
	n.Revoked = &r
	return true
}

// SetVote records a voter's choice, replacing an earlier one (a vote older than the one on
// record is ignored).
func (n *MessageNotes) SetVote(v Vote) bool {
	i := slices.IndexFunc(n.Votes, func(o Vote) bool {
		return (v.Voter != "" && o.Voter == v.Voter) || (v.LID != "" && o.LID == v.LID)
	})
	if i >= 0 {
		if n.Votes[i].At > v.At {
			return false
		}
		n.Votes[i] = v
		return true
	}
	n.Votes = append(n.Votes, v)
	return true
}

// Empty tells whether nothing is on record.
func (n MessageNotes) Empty() bool {
	return len(n.Reactions) == 0 && n.Edit == nil && n.Revoked == nil && len(n.Votes) == 0
}

// PollCount is one option's count in a poll's results.
type PollCount struct {
	Name   string   `json:"name"`
	Count  int      `json:"count"`
	Voters []string `json:"voters"`
}

// Tally counts votes for each option, in the poll's order; a choice that is not an option is
// not counted.
func Tally(options []string, votes []Vote) []PollCount {
	out := make([]PollCount, len(options))
	for i, o := range options {
		out[i] = PollCount{Name: o, Voters: []string{}}
	}
	for _, v := range votes {
		for _, choice := range v.Options {
			if i := slices.Index(options, choice); i >= 0 && !slices.Contains(out[i].Voters, v.Voter) {
				out[i].Count++
				out[i].Voters = append(out[i].Voters, v.Voter)
			}
		}
	}
	return out
}

// Editing and revoking windows (DESIGN.md section 16).
const (
	EditWindow   = 15 * time.Minute
	RevokeWindow = 48 * time.Hour
)

// ContactsCheckPerDay is how many numbers a session may look up on the network per UTC day
// (POST /api/v1/contacts/check): a lookup in bulk is a ban signal.
const ContactsCheckPerDay = 200
