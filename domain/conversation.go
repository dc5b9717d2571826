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

// IsOneEmoji reports whether s is one emoji as a reaction carries it: one pictograph with its
// presentation selector, skin tone, keycap or tag sequence, several joined by zero-width
// joiners (a family), or a flag's two regional indicators. "👍👍" and "ok" are not.
func IsOneEmoji(s string) bool {
	bases, ris, afterZWJ, keycapBase := 0, 0, false, false
	for _, r := range s {
		switch {
		case r == 0x200D: // zero-width joiner
			if bases == 0 || afterZWJ {
				return false
			}
			afterZWJ = true
			continue
		case r == 0xFE0F || r == 0xFE0E || (r >= 0x1F3FB && r <= 0x1F3FF) || (r >= 0xE0020 && r <= 0xE007F):
			// presentation selectors, skin tones, tag characters: modify what precedes them
			if bases == 0 && ris == 0 {
				return false
			}
			continue
		case r == 0x20E3: // combining keycap: after a digit, # or *
			if !keycapBase {
				return false
			}
			keycapBase = false
			continue
		case r >= 0x1F1E6 && r <= 0x1F1FF: // regional indicator: two make a flag
			if ris++; ris > 2 || bases > 0 {
				return false
			}
			continue
		case (r >= '0' && r <= '9') || r == '#' || r == '*':
			if bases > 0 || ris > 0 {
				return false
			}
			keycapBase, bases = true, 1
			continue
		case !pictograph(r):
			return false
		}
		if ris > 0 || keycapBase || (bases > 0 && !afterZWJ) {
			return false
		}
		bases++
		afterZWJ = false
	}
	return !afterZWJ && !keycapBase && ((bases > 0 && ris == 0) || (bases == 0 && ris == 2))
}

// pictograph reports whether r is in one of Unicode's emoji blocks (or one of the older
// symbols that have emoji presentation).
func pictograph(r rune) bool {
	switch {
	case r >= 0x1F000 && r <= 0x1FAFF, r >= 0x2600 && r <= 0x27BF, r >= 0x2300 && r <= 0x23FF,
		r >= 0x2B00 && r <= 0x2BFF, r >= 0x2190 && r <= 0x21FF, r >= 0x25A0 && r <= 0x25FF, r >= 0x2900 && r <= 0x297F:
		return true
	}
	switch r {
	case 0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x24C2, 0x3030, 0x303D, 0x3297, 0x3299:
		return true
	}
	return false
}
