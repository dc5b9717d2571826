package domain

import (
	"math/rand/v2"
	"time"
)

// Session statuses. SPEC.md section 3.2: an admin-created session reports "created" until it is
// started; the client view shows CONNECTED, SCAN_QR or DISCONNECTED (NOT_CREATED is the
// absence of a session).
const (
	StatusCreated      = "created"
	StatusScanQR       = "SCAN_QR"
	StatusConnected    = "CONNECTED"
	StatusDisconnected = "DISCONNECTED"
	StatusNotCreated   = "NOT_CREATED"
)

// Session is a messaging session's persisted snapshot (and the view its actor publishes).
type Session struct {
	ID string `json:"id"`
	// Kind is linked ("" for sessions made before kinds) or cloud (DESIGN.md section 17).
	Kind         string    `json:"kind,omitempty"`
	Name         string    `json:"name"`
	Status       string    `json:"status"`
	Phone        string    `json:"phone"`
	AssignedTo   string    `json:"assignedTo"`
	AssignedAt   time.Time `json:"assignedAt"`
	CreatedAt    time.Time `json:"createdAt"`
	LastActivity time.Time `json:"lastActivity"`
	// Linked: the device is paired to a phone (it reconnects at boot without a scan).
	Linked bool `json:"linked"`
	// Proxy carries the session's connections to the network ("socks5://user:pass@host:port" or
	// "http://host:port"; "" = direct). A change applies from the next connect.
	Proxy string `json:"proxy,omitempty"`
	// Pacing overrides the plan's and the network's pacing for this session (nil = none).
	Pacing *Pacing `json:"pacing,omitempty"`
	// StatusReason says why the session is not connected (logged_out, banned, outdated,
	// replaced, keepalive, network; "" while connected), and Until when a ban ends.
	StatusReason string    `json:"statusReason,omitempty"`
	Until        time.Time `json:"until"`
	// TimelockUntil: the network refuses first messages to new contacts until then (WhatsApp's
	// reach-out timelock); those wait meanwhile, replies to contacts who wrote still go. Zero
	// when none. The API shows it as restrictedUntil (and timelockUntil, its older name).
	TimelockUntil time.Time `json:"timelockUntil"`
	// LogoutAt: the phone has not been seen for days and the network is expected to unlink the
	// device then (a warning; zero when none).
	LogoutAt time.Time `json:"logoutAt"`
	// QR is the latest QR code text while Status is SCAN_QR (not persisted).
	QR string `json:"-"`
	// Queue is the session's delivery queue as of the view (not persisted).
	Queue QueueStats `json:"-"`
	// Moving: in a cluster, the session is being moved to this user's partition (DESIGN.md
	// section 13.1); its actor is stopped and the node that holds the record finishes the
	// move. Empty otherwise.
	Moving string `json:"moving,omitempty"`
	// Cloud is a cloud session's phone number at Meta (nil for a linked session).
	Cloud *CloudNumber `json:"cloud,omitempty"`
	// Unreachable: the recipients the network refused twice, until when messages to them fail
	// at once (not persisted here: protection records). Never changed once published.
	Unreachable map[string]time.Time `json:"-"`
}

// ClientStatus is the status as the dashboard sees it.
func (s Session) ClientStatus() string {
	if s.Status == StatusCreated {
		return StatusDisconnected
	}
	return s.Status
}

// QueueStats describes a session's delivery queue.
type QueueStats struct {
	Depth    int    // accepted messages without a network outcome
	OldestAt Millis // acceptance time of the oldest (0 when empty)
}

// Pacing is how fast a session's queue may deliver (DESIGN.md section 9). Zero fields mean no
// limit. Every field is optional in JSON so a partial override keeps the rest.
type Pacing struct {
	// MinGapMs is the least time between two sends; JitterMs adds a random 0..JitterMs on top.
	MinGapMs int64 `json:"minGapMs"`
	JitterMs int64 `json:"jitterMs"`
	// PerMinute caps the sends in any 60 s window.
	PerMinute int `json:"perMinute"`
	// NewContactsPerDay caps first messages to numbers the session never wrote to, per UTC day;
	// RampDays ramps that cap up linearly over a newly linked account's first days.
	NewContactsPerDay int `json:"newContactsPerDay"`
	// NewContactsFirstDay is the cap on the day a number is linked (default: the ramp's even
	// step, at least 1).
	NewContactsFirstDay int `json:"newContactsFirstDay"`
	RampDays            int `json:"rampDays"`
	// PerDay caps a session's sends per UTC day, replies included.
	PerDay int `json:"perDay"`
}

// IsZero tells whether the pacing limits nothing.
func (p Pacing) IsZero() bool { return p == Pacing{} }

// Gap is the wait after a send: the minimum gap plus its jitter.
func (p Pacing) Gap() time.Duration {
	g := time.Duration(p.MinGapMs) * time.Millisecond
	if p.JitterMs > 0 {
		g += time.Duration(rand.Int64N(p.JitterMs+1)) * time.Millisecond
	}
	return g
}

// NewContactCap is the new-contact cap on the given day of a linked account's life (day 0 is
// the day it was linked).
func (p Pacing) NewContactCap(day int) int {
	if p.NewContactsPerDay <= 0 || p.RampDays <= 0 || day >= p.RampDays {
		return p.NewContactsPerDay
	}
	first := p.NewContactsFirstDay
	if first <= 0 {
		first = max(p.NewContactsPerDay/p.RampDays, 1)
	}
	first = min(first, p.NewContactsPerDay)
	return first + (p.NewContactsPerDay-first)*day/p.RampDays
}

// Merge returns p with the non-zero fields of o laid over it.
func (p Pacing) Merge(o *Pacing) Pacing {
	if o == nil {
		return p
	}
	if o.MinGapMs != 0 {
		p.MinGapMs = o.MinGapMs
	}
	if o.JitterMs != 0 {
		p.JitterMs = o.JitterMs
	}
	if o.PerMinute != 0 {
		p.PerMinute = o.PerMinute
	}
	if o.NewContactsPerDay != 0 {
		p.NewContactsPerDay = o.NewContactsPerDay
	}
	if o.NewContactsFirstDay != 0 {
		p.NewContactsFirstDay = o.NewContactsFirstDay
	}
	if o.RampDays != 0 {
		p.RampDays = o.RampDays
	}
	if o.PerDay != 0 {
		p.PerDay = o.PerDay
	}
	return p
}

// Half is p at half rate (DESIGN.md section 14): gaps doubled, caps halved (a cap stays at
// least 1). The new-contact ramp keeps its shape: NewContactCap halves each day's cap.
func (p Pacing) Half() Pacing {
	half := func(n int) int {
		if n <= 0 {
			return n
		}
		return max(n/2, 1)
	}
	p.MinGapMs, p.JitterMs = 2*p.MinGapMs, 2*p.JitterMs
	p.PerMinute, p.PerDay = half(p.PerMinute), half(p.PerDay)
	p.NewContactsPerDay, p.NewContactsFirstDay = half(p.NewContactsPerDay), half(p.NewContactsFirstDay)
	return p
}
