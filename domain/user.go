package domain

import "time"

// Roles.
const (
	RoleClient = "client"
	RoleAdmin  = "admin"
)

// User is a dashboard user's profile.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	Role      string    `json:"role"` // client | admin
	Plan      string    `json:"plan"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Settings are the store loop's: time zone, quiet hours, stop words and replies.
	Settings UserSettings `json:"settings"`
}

// Plan is one row of the plan table (DESIGN.md section 4). Zero means no cap.
type Plan struct {
	RateLimit       int64 `json:"rate_limit"`       // API requests per UTC day
	MonthlyMessages int64 `json:"monthly_messages"` // messages per UTC calendar month
	// Pacing is the plan's delivery pacing (nil = the network's defaults).
	Pacing *Pacing `json:"pacing,omitempty"`
}

// Key statuses.
const (
	KeyActive  = "active"
	KeyRevoked = "revoked"
)

// Scopes an API key can have.
const (
	ScopeText         = "send_text"
	ScopeMedia        = "send_media"
	ScopeBulk         = "send_bulk"
	ScopeReadMessages = "read_messages"
)

// APIKey is an API key record; the raw key is never stored.
type APIKey struct {
	ID        string     `json:"id"`
	UserID    string     `json:"userId"`
	Name      string     `json:"name"`
	Hash      string     `json:"hash"` // hex SHA-256 of the raw key
	Last4     string     `json:"last4"`
	Status    string     `json:"status"` // active | revoked
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

// KeyUsage is a key's persisted counter marks (high-water marks reserved in blocks).
type KeyUsage struct {
	Day       string `json:"day"`       // UTC day "2006-01-02" the DayMark belongs to
	DayMark   int64  `json:"dayMark"`   // requests counted today may not exceed this after a crash
	CallsMark int64  `json:"callsMark"` // api_calls high-water mark (all time)
}

// Allowance is a user's monthly message allowance snapshot.
type Allowance struct {
	UserID string `json:"userId"`
	Period string `json:"period"` // UTC month "2006-01" that Sent belongs to
	Sent   int64  `json:"sent"`   // messages sent successfully this period (messagesSent)
	// Mark is a durable upper bound on Sent plus reservations this period: allowance beyond it
	// is granted only once a larger mark is committed, so a kill -9 (which can lose the last
	// increments of Sent) never lets the month's limit be exceeded.
	Mark int64 `json:"mark"`
	// At, Since and Recent let a boot after a kill -9 count what the snapshot left out (the
	// count is written behind): At is when Sent was read (ms), Recent how many of the messages
	// Sent counts were sent (their send time) at or after Since (ms, a whole second), so the
	// messages of the outbox sent at or after Since, less Recent, are the ones it does not count.
	At     int64 `json:"at,omitempty"`
	Since  int64 `json:"since,omitempty"`
	Recent int64 `json:"recent,omitempty"`
}

// AccountRecount is a user's allowance after a kill -9 (persist.Accounts.Recount): the snapshot
// with Sent counting the messages sent this month that it left out, and the send times of the
// messages of its window (its Since on) that it now counts, which the next snapshots' Recent
// must count.
type AccountRecount struct {
	Allowance Allowance
	Sent      []Millis
}

// Grant is an API key's view as one call was authorized: its record and its daily limits.
type Grant struct {
	Key       APIKey
	Plan      string
	Limit     int64     // daily cap, 0 = none
	Used      int64     // requests counted today
	Remaining int64     // requests left today (0 when Limit is 0)
	Reset     time.Time // start of the next UTC day
	APICalls  int64
}
