package domain

import "time"

// What protects a linked phone's account on the network (DESIGN.md section 14), kept as
// records keyed by (session, phone) so that a restart, or a move of the session to another
// node, restores every protection (section 13). They belong to the phone: a new phone linked to
// the session starts anew, the same phone linked again keeps them.

// Protections is one linked phone's pacing state on one session.
type Protections struct {
	SessionID string `json:"session"`
	Phone     string `json:"phone"`
	// LinkedAt is when the phone was first linked to the session: the new-contact ramp counts
	// its days from it.
	LinkedAt Millis `json:"linkedAt"`
	// TimelockUntil: the network's account-wide reach-out timelock holds first messages to
	// new contacts until then (0: none).
	TimelockUntil Millis `json:"timelockUntil,omitempty"`
	// Day is the UTC day (DayOf) the counts are of; Sends and NewContacts count the sends and
	// the first messages to new contacts handed to the network that day, counted before they
	// go, so a crash never undercounts.
	Day         int `json:"day"`
	Sends       int `json:"sends"`
	NewContacts int `json:"newContacts"`
	// Checks counts the numbers looked up on the network that day (POST
	// /api/v1/contacts/check; at most ContactsCheckPerDay).
	Checks int `json:"checks,omitempty"`
	// SlowUntil: half rate until then (0: none), for SlowReason (WarnBanEnded, WarnRefusals).
	SlowUntil  Millis `json:"slowUntil,omitempty"`
	SlowReason string `json:"slowReason,omitempty"`
	// Banned: a ban was seen and the phone has not connected since (its end starts half rate).
	Banned bool `json:"banned,omitempty"`
}

// Roll starts a new day's counts when day is not the counts' day.
func (p *Protections) Roll(day int) {
	if p.Day != day {
		p.Day, p.Sends, p.NewContacts, p.Checks = day, 0, 0, 0
	}
}

// Contact is what a linked phone's contact book knows of one number.
type Contact struct {
	// SentDay is the UTC day (DayOf) the phone first wrote to the number (0: never).
	SentDay int `json:"sentDay,omitempty"`
	// Wrote is when the number first wrote to the phone (0: never): replies to it go out even
	// while a reach-out timelock holds first messages.
	Wrote Millis `json:"wrote,omitempty"`
	// What GET /api/v1/contacts shows (DESIGN.md section 16): the number's LID and profile name
	// where the network gave them, when it was first seen, and when it last wrote to the phone
	// and was last written to (kept to the hour: the book is not written for every message).
	LID     string `json:"lid,omitempty"`
	Name    string `json:"name,omitempty"`
	First   Millis `json:"first,omitempty"`
	LastIn  Millis `json:"lastIn,omitempty"`
	LastOut Millis `json:"lastOut,omitempty"`
}

// BookEntry is one number of a contact book, as listed.
type BookEntry struct {
	Number string
	Contact
}

// Seen records that the number wrote to the phone at at (inbound) or was written to (outbound),
// with the LID and name the network gave (kept when empty). It reports whether the record
// changed enough to be written: times are kept to the hour.
func (c *Contact) Seen(at Millis, inbound bool, lid, name string) bool {
	changed := false
	if c.First == 0 || at < c.First {
		c.First, changed = at, true
	}
	last := &c.LastOut
	if inbound {
		last = &c.LastIn
	}
	if at-*last >= Millis(time.Hour/time.Millisecond) {
		*last, changed = at, true
	}
	if lid != "" && lid != c.LID {
		c.LID, changed = lid, true
	}
	if name != "" && name != c.Name {
		c.Name, changed = name, true
	}
	return changed
}

// Known tells whether a message to the number is not a first message to a new contact.
func (c Contact) Known() bool { return c.SentDay != 0 || c.Wrote != 0 }

// RecipientMark: the network refused a recipient (Code) until Until; messages to it fail at
// once meanwhile, unless it writes to the phone, which clears the mark.
type RecipientMark struct {
	To    string `json:"to"`
	Code  string `json:"code"`
	Until Millis `json:"until"`
}

// RecipientMarkTTL is how long a recipient stays marked.
const RecipientMarkTTL = 24 * time.Hour

// DayOf is t's UTC day: days since 1970-01-01.
func DayOf(t time.Time) int {
	s := t.Unix()
	d := s / 86400
	if s < 0 && s%86400 != 0 {
		d--
	}
	return int(d)
}

// DayStart is the start of UTC day d.
func DayStart(d int) time.Time { return time.Unix(int64(d)*86400, 0).UTC() }
