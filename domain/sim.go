package domain

import "time"

// Delivered is a message as the simulated network delivered it (GET /api/dev/sim/messages).
type Delivered struct {
	ID           string    `json:"id"`
	From         string    `json:"from"`
	To           string    `json:"to"`
	Type         string    `json:"type"`
	Text         string    `json:"text,omitempty"`
	Caption      string    `json:"caption,omitempty"`
	FileName     string    `json:"fileName,omitempty"`
	MimeType     string    `json:"mimeType,omitempty"`
	Bytes        int       `json:"bytes,omitempty"`
	PTT          bool      `json:"ptt,omitempty"`
	Lat          *float64  `json:"lat,omitempty"` // a location's (0 included)
	Lng          *float64  `json:"lng,omitempty"`
	Address      string    `json:"address,omitempty"`
	LocationName string    `json:"locationName,omitempty"`
	ContactName  string    `json:"contactName,omitempty"`
	ContactPhone string    `json:"contactPhone,omitempty"`
	Timestamp    time.Time `json:"timestamp"`
	// Conversations (DESIGN.md section 16).
	ReplyTo  string   `json:"replyTo,omitempty"`   // the id of the message it quotes
	Quoted   string   `json:"quoted,omitempty"`    // the quoted message's text, as the phone shows it
	Emoji    string   `json:"emoji,omitempty"`     // a reaction's emoji ("" takes it back)
	Target   string   `json:"messageId,omitempty"` // what a reaction, an edit or a revoke is about
	Question string   `json:"question,omitempty"`  // a poll
	Options  []string `json:"options,omitempty"`
	Multiple bool     `json:"multiple,omitempty"`
	Edited   bool     `json:"edited,omitempty"`  // the text was changed since (Text is the new one)
	Revoked  bool     `json:"revoked,omitempty"` // deleted for everyone since
	Group    string   `json:"group,omitempty"`   // sent to this group
	Typing   bool     `json:"typing,omitempty"`  // the phone saw "typing…" first
}

// SimInbound is what a phone does to a session on the simulated network (POST
// /api/dev/sim/inbound): writes to it (Type text, the default, optionally quoting ReplyTo),
// reacts to a message (reaction: MessageID, Emoji), votes in a poll (poll_vote: MessageID,
// Options), edits or revokes a message it wrote (edit: MessageID, Text; revoke: MessageID), in
// a direct conversation or in Group.
type SimInbound struct {
	From      string   `json:"from"`
	Type      string   `json:"type"`
	Text      string   `json:"text"`
	MessageID string   `json:"messageId"`
	Emoji     string   `json:"emoji"`
	Options   []string `json:"options"`
	ReplyTo   string   `json:"replyTo"`
	Group     string   `json:"group"`
}

// Types of SimInbound.
const (
	SimText     = "text"
	SimReaction = "reaction"
	SimPollVote = "poll_vote"
	SimEdit     = "edit"
	SimRevoke   = "revoke"
)

// Folded is what a phone shows of the messages it got, in delivery order: edits and revokes
// laid over the messages they change, not listed themselves.
func Folded(ds []Delivered) []Delivered {
	out := make([]Delivered, 0, len(ds))
	at := map[string]int{}
	for _, d := range ds {
		switch Kind(d.Type) {
		case KindEdit, KindRevoke:
			if i, ok := at[d.Target]; ok {
				if Kind(d.Type) == KindEdit {
					out[i].Text, out[i].Edited = d.Text, true
				} else {
					out[i].Revoked = true
				}
			}
			continue
		}
		at[d.ID] = len(out)
		out = append(out, d)
	}
	return out
}
