package domain

import "time"

// Kind is a message kind, as SPEC.md section 4.4 names them.
type Kind string

// Message kinds.
const (
	KindText     Kind = "text"
	KindImage    Kind = "image"
	KindVideo    Kind = "video"
	KindAudio    Kind = "audio"
	KindDocument Kind = "document"
	KindLocation Kind = "location"
	KindContact  Kind = "contact"
)

// Message is one outbound message. ID is chosen by the gateway (the outbox id) and is passed to
// the network as the message id, so a re-send after a crash is not a duplicate.
//
// The JSON names are how outboxes store a message: absent fields are left out.
type Message struct {
	ID       string  `json:"id"`
	To       string  `json:"to"` // digits with country code, no plus sign
	Kind     Kind    `json:"kind"`
	Text     string  `json:"text,omitempty"`     // text body (KindText)
	Caption  string  `json:"caption,omitempty"`  // image, video, document
	FileName string  `json:"fileName,omitempty"` // media file name
	MimeType string  `json:"mimeType,omitempty"` // media MIME type, sniffed by the gateway
	Data     []byte  `json:"data,omitempty"`     // media bytes
	Lat      float64 `json:"lat,omitempty"`
	Lng      float64 `json:"lng,omitempty"`
	Address  string  `json:"address,omitempty"` // location title or address
	// Contact card.
	ContactName  string `json:"contactName,omitempty"`
	ContactPhone string `json:"contactPhone,omitempty"`
}

// MessageStatus is where a message is in its life (DESIGN.md section 9):
// queued → sent → delivered → read, or failed, or cancelled (revoked while still queued).
type MessageStatus = string

// Message statuses.
const (
	MsgQueued    MessageStatus = "queued"
	MsgSent      MessageStatus = "sent"
	MsgDelivered MessageStatus = "delivered"
	MsgRead      MessageStatus = "read"
	MsgFailed    MessageStatus = "failed"
	MsgCancelled MessageStatus = "cancelled"
)

// StatusRank orders statuses: a receipt never moves a message backwards (a read receipt may
// overtake the delivered one).
func StatusRank(s MessageStatus) int {
	switch s {
	case MsgScheduled:
		return -1 // before queued: a scheduled message is queued at its time
	case MsgQueued:
		return 0
	case MsgSent:
		return 1
	case MsgDelivered:
		return 2
	case MsgRead:
		return 3
	case MsgFailed, MsgCancelled:
		return 4
	}
	return -1
}

// StatusChange is one step of a message's history.
type StatusChange struct {
	Status MessageStatus `json:"status"`
	At     Millis        `json:"at"`
}

// OutboxEntry is one accepted message: committed before it goes to the network, its outcome
// recorded after. An entry without an outcome at boot is sent again with the same id, which the
// network treats as the same message.
type OutboxEntry struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	UserID    string `json:"userId"`
	Origin    string `json:"origin"` // api, dashboard, campaign:<id>, store:<shop>
	// From is the phone the session was linked to at accept: the message is never sent from
	// another phone ("" for entries accepted before it was recorded).
	From      string         `json:"from,omitempty"`
	Message   Message        `json:"message"`
	Status    MessageStatus  `json:"status"`
	NetworkID string         `json:"networkId,omitempty"`
	SentAt    Millis         `json:"sentAt,omitempty"` // 0 until sent
	Code      string         `json:"code,omitempty"`   // the failure's stable code
	Error     string         `json:"error,omitempty"`
	Attempts  int            `json:"attempts,omitempty"` // sends tried on the network
	CreatedAt Millis         `json:"createdAt"`
	UpdatedAt Millis         `json:"updatedAt"`
	History   []StatusChange `json:"history,omitempty"`
	// SendAt is when a message accepted for later goes (0: at once); it is scheduled until
	// then (DESIGN.md section 18).
	SendAt Millis `json:"sendAt,omitempty"`
	// Transactional: sent to a phone on the suppression list because the user said the
	// recipient asked for it (a send's transactional: true).
	Transactional bool `json:"transactional,omitempty"`
}

// Final tells whether the network's outcome is known (sent or beyond, failed, or cancelled).
func (e OutboxEntry) Final() bool {
	return e.Status != MsgQueued && e.Status != MsgScheduled && e.Status != ""
}

// SetStatus records a status change at t (history included). A change that would move the
// message backwards (a late delivered after read) is ignored; it reports whether it applied.
func (e *OutboxEntry) SetStatus(s MessageStatus, t time.Time) bool {
	if e.Status == s || (e.Status != "" && StatusRank(s) < StatusRank(e.Status)) || e.Status == MsgFailed || e.Status == MsgCancelled {
		return false
	}
	e.Status = s
	e.UpdatedAt = MillisOf(t)
	e.History = append(e.History, StatusChange{Status: s, At: MillisOf(t)})
	return true
}

// Millis is a time in Unix milliseconds. Outbox entries are encoded twice per message, and
// encoding time.Time as text cost about 5 % of a send's CPU (profiled): an integer is cheap.
type Millis int64

// MillisOf converts a time.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time converts back (UTC).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)).UTC() }
