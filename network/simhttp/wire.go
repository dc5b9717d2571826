// Package simhttp carries the network port (network.Network, network.Client) over HTTP, so the
// simulated network can run as its own process (`gateway sim`) and every node of a cluster
// uses the same one: the same phones, the same deliveries, one journal. Server serves a
// sim.Network's port under /api/sim/v1/; Dial returns a network.Network that calls it.
//
// Calls are JSON POSTs; events come back by long poll (GET /api/sim/v1/events), each with a
// sequence number, so a poll that fails loses nothing (the next one asks from the same
// place). Each process that dials the sim is a subscriber with a random id; a session's events
// go to the subscriber that last took it (Connect, PairPhone or Logout), as a WhatsApp device
// connection moves to the process that connects it last: the previous one hears
// Disconnected{StatusReason: replaced}, and its Send answers ErrNotConnected from then on.
// A message id is delivered at most once, whichever node sends it (the sim's journal).
//
// Errors cross the wire as codes and come back as the port's errors (errors.Is works,
// TimelockError and RetryLaterError keep their fields); the sim's dev-control errors keep
// their domain codes. A Send whose request may have reached the sim and got no answer is
// ErrUnknownOutcome (the core sends it again under the same id; the sim delivers it once).
//
// It imports the network port, the sim and domain, fasthttp and goccy/go-json.
package simhttp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// PathPrefix is where Server answers; the sim process serves its dev routes (/api/dev/sim/*)
// beside it.
const PathPrefix = "/api/sim/v1/"

// call is every call's body.
type call struct {
	Sub     string             `json:"sub"`
	Session string             `json:"session"`
	Phone   string             `json:"phone,omitempty"`
	Phones  []string           `json:"phones,omitempty"` // Lookup; CreateGroup's participants
	Message *domain.Message    `json:"message,omitempty"`
	Ref     *domain.MessageRef `json:"ref,omitempty"`   // MarkRead
	Group   string             `json:"group,omitempty"` // UpdateParticipants, InviteLink
	Name    string             `json:"name,omitempty"`  // CreateGroup
	Add     []string           `json:"add,omitempty"`
	Remove  []string           `json:"remove,omitempty"`
}

// answer is every call's answer (the fields of the call that was made).
type answer struct {
	Code    string               `json:"code,omitempty"` // PairPhone
	OK      bool                 `json:"ok,omitempty"`   // Paired
	Phone   string               `json:"phone,omitempty"`
	Receipt *network.Receipt     `json:"receipt,omitempty"`
	Checks  []domain.NumberCheck `json:"checks,omitempty"` // Lookup
	Groups  []domain.Group       `json:"groups,omitempty"` // Groups
	Group   *domain.Group        `json:"group,omitempty"`  // CreateGroup, UpdateParticipants
	Link    string               `json:"link,omitempty"`   // InviteLink
}

// wireError is a failed call's answer (HTTP 4xx/5xx).
type wireError struct {
	Error   string    `json:"error"`
	Code    string    `json:"code"`
	NetCode int       `json:"netCode,omitempty"`
	Until   time.Time `json:"until,omitzero"`
	AfterMS int64     `json:"afterMs,omitempty"`
}

// wireEvent is one event of a session.
type wireEvent struct {
	Seq     uint64          `json:"seq"`
	Session string          `json:"session"`
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// poll is GET /events's answer.
type poll struct {
	Instance string      `json:"instance"`        // the sim process (a restart changes it)
	Reset    bool        `json:"reset,omitempty"` // the subscriber was forgotten: events were lost
	Events   []wireEvent `json:"events"`
}

// The port's errors by wire code, the ones with fields first.
var portErrors = []struct {
	code string
	err  error
}{
	{"not_connected", domain.ErrNotConnected},
	{"not_on_network", network.ErrNotOnNetwork},
	{"not_reachable", network.ErrNotReachable},
	{"banned", network.ErrBanned},
	{"outdated", network.ErrOutdated},
	{"unknown_outcome", network.ErrUnknownOutcome},
	{"unsupported", network.ErrUnsupported},
	{"already_paired", network.ErrAlreadyPaired},
	{"group_not_found", domain.ErrGroupNotFound},
	{"not_group_admin", domain.ErrNotGroupAdmin},
	{"canceled", context.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded},
}

func encodeError(err error) wireError {
	w := wireError{Error: err.Error()}
	var te *network.TimelockError
	var re *network.RetryLaterError
	switch {
	case errors.As(err, &te):
		w.Code, w.Until, w.NetCode = "timelock", te.Until, te.Code
		return w
	case errors.As(err, &re):
		w.Code, w.AfterMS, w.NetCode = "rate_limited", re.After.Milliseconds(), re.Code
		if errors.Is(re.Err, network.ErrRefused) {
			w.Code = "refused"
		}
		return w
	case errors.Is(err, network.ErrTimelock):
		w.Code = "timelock"
		return w
	}
	for _, pe := range portErrors {
		if errors.Is(err, pe.err) {
			w.Code = pe.code
			return w
		}
	}
	if c := domain.CodeOf(err); c != "" {
		w.Code = "domain:" + c
		return w
	}
	w.Code = "internal"
	return w
}

func decodeError(w wireError) error {
	detail := errors.New(w.Error)
	switch w.Code {
	case "timelock":
		return &network.TimelockError{Until: w.Until, Code: w.NetCode, Detail: detail}
	case "rate_limited":
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: w.NetCode, After: time.Duration(w.AfterMS) * time.Millisecond, Detail: detail}
	case "refused":
		return &network.RetryLaterError{Err: network.ErrRefused, Code: w.NetCode, After: time.Duration(w.AfterMS) * time.Millisecond, Detail: detail}
	}
	for _, pe := range portErrors {
		if pe.code == w.Code {
			return fmt.Errorf("sim: %s: %w", w.Error, pe.err)
		}
	}
	if c, ok := strings.CutPrefix(w.Code, "domain:"); ok {
		return domain.E(c, w.Error)
	}
	return fmt.Errorf("sim: %s", w.Error)
}

// eventKinds are the port's events by wire type.
var eventKinds = []struct {
	name   string
	zero   network.Event
	decode func(json.RawMessage) (network.Event, error)
}{
	{"qr", network.QRCode{}, decodeAs[network.QRCode]},
	{"qr_timeout", network.QRTimeout{}, decodeAs[network.QRTimeout]},
	{"paired", network.Paired{}, decodeAs[network.Paired]},
	{"connected", network.Connected{}, decodeAs[network.Connected]},
	{"disconnected", network.Disconnected{}, decodeAs[network.Disconnected]},
	{"logged_out", network.LoggedOut{}, decodeAs[network.LoggedOut]},
	{"timelock", network.Timelock{}, decodeAs[network.Timelock]},
	{"receipt", network.MessageReceipt{}, decodeAs[network.MessageReceipt]},
	{"incoming", network.Incoming{}, decodeAs[network.Incoming]},
	{"reaction", network.Reaction{}, decodeAs[network.Reaction]},
	{"edited", network.Edited{}, decodeAs[network.Edited]},
	{"revoked", network.Revoked{}, decodeAs[network.Revoked]},
	{"poll_vote", network.PollVote{}, decodeAs[network.PollVote]},
	{"phone_offline", network.PhoneOffline{}, decodeAs[network.PhoneOffline]},
	{"phone_online", network.PhoneOnline{}, decodeAs[network.PhoneOnline]},
}

func decodeAs[E network.Event](data json.RawMessage) (network.Event, error) {
	var e E
	if len(data) > 0 {
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func encodeEvent(ev network.Event) (string, json.RawMessage, error) {
	for _, k := range eventKinds {
		if reflect.TypeOf(ev) == reflect.TypeOf(k.zero) {
			b, err := json.Marshal(ev)
			return k.name, b, err
		}
	}
	return "", nil, fmt.Errorf("simhttp: event %T has no wire type", ev)
}

func decodeEvent(t string, data json.RawMessage) (network.Event, error) {
	for _, k := range eventKinds {
		if k.name == t {
			return k.decode(data)
		}
	}
	return nil, fmt.Errorf("simhttp: unknown event type %q", t)
}
