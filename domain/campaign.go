package domain

import (
	"strings"
	"time"
)

// Campaign statuses.
const (
	// CampaignScheduled: accepted with a sendAt ahead; its first number goes then.
	CampaignScheduled = "scheduled"
	CampaignQueued    = "queued"
	CampaignRunning   = "running"
	CampaignCompleted = "completed"
	CampaignCancelled = "cancelled"
	CampaignFailed    = "failed"
)

// CampaignDetail is one number's outcome (SPEC.md section 2.5).
type CampaignDetail struct {
	Number    string `json:"number"`
	Success   bool   `json:"success"`
	MessageID string `json:"messageId"`
	Error     string `json:"error,omitempty"`
	// Status is the number's outcome: sent, failed, or opted_out (skipped: the phone is on the
	// suppression list; nothing charged). "" in records written before it existed.
	Status string `json:"status,omitempty"`
}

// Per-number outcomes (CampaignDetail.Status).
const (
	DetailSent     = "sent"
	DetailFailed   = "failed"
	DetailOptedOut = "opted_out"
)

// Campaign is a bulk campaign's persisted record. Details are stored one key per number
// beside it (so a step writes one small record, not the whole list), and loaded into Details.
type Campaign struct {
	ID        string `json:"id"`
	UserID    string `json:"userId"`
	SessionID string `json:"sessionId"`
	// Name is what the dashboard shows ("" for a campaign started through the API without one).
	Name    string   `json:"name,omitempty"`
	Message string   `json:"message"`
	Numbers []string `json:"numbers"`
	// Names, when set, has one entry per number: the {name} of that number's message.
	Names  []string `json:"names,omitempty"`
	Delay  float64  `json:"delay"` // seconds between consecutive sends
	Status string   `json:"status"`
	// Granted is how many numbers the allowance covers (the batch is clipped to it).
	Granted int `json:"granted"`
	// Cursor is the index of the next number to process. Its message id is derived from the
	// campaign id and the index, so after a crash the number is resolved through the outbox
	// under that id: never sent twice.
	Cursor int `json:"cursor"`
	// NextAt is when the next number is due (its delay after the previous send started): a
	// campaign resumed after a restart waits for it rather than sending at once.
	NextAt     time.Time `json:"nextAt"`
	Successful int       `json:"successful"`
	Failed     int       `json:"failed"`
	// OptedOut counts the numbers skipped because they are on the suppression list.
	OptedOut int `json:"optedOut,omitempty"`
	// StartAt is when a campaign accepted for later starts (zero: at once).
	StartAt   time.Time        `json:"startAt,omitempty"`
	Details   []CampaignDetail `json:"-"`
	CreatedAt time.Time        `json:"createdAt"`
	UpdatedAt time.Time        `json:"updatedAt"`
	Error     string           `json:"error,omitempty"`
}

// Done tells whether the campaign has ended.
//
// A scheduled campaign is not done: its actor waits for StartAt.
func (s Campaign) Done() bool {
	return s.Status == CampaignCompleted || s.Status == CampaignCancelled || s.Status == CampaignFailed
}

// NamePlaceholder is replaced in a campaign's message by each number's name (Campaign.Names).
const NamePlaceholder = "{name}"

// TextFor is the message of the campaign's number idx: {name} replaced by its name.
func (s Campaign) TextFor(idx int) string {
	if len(s.Names) == 0 || !strings.Contains(s.Message, NamePlaceholder) {
		return s.Message
	}
	name := ""
	if idx >= 0 && idx < len(s.Names) {
		name = s.Names[idx]
	}
	return strings.ReplaceAll(s.Message, NamePlaceholder, name)
}
