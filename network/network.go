// Package network is the messaging-network port: what a session actor needs from a messaging
// network (link a device by QR or phone code, keep it connected, send every message kind, log
// out). Implementations live in sub-packages: sim (the embedded default) and whatsapp
// (whatsmeow). This package imports only domain; adapters import only this and domain.
package network

import (
	"context"
	"errors"
	"time"

	"github.com/gateway/gateway/domain"
)

// Kind and Message are the domain's (the port speaks the gateway's vocabulary).
type (
	Kind    = domain.Kind
	Message = domain.Message
)

// Message kinds.
const (
	KindText     = domain.KindText
	KindImage    = domain.KindImage
	KindVideo    = domain.KindVideo
	KindAudio    = domain.KindAudio
	KindDocument = domain.KindDocument
	KindLocation = domain.KindLocation
	KindContact  = domain.KindContact
)

// Receipt is the network's acknowledgement of a sent message.
type Receipt struct {
	ID string    // the network's message id (equals Message.ID where the network honours it)
	At time.Time // server time of the acknowledgement
}

// Event is something that happened to a linked device; a Client reports events through the
// sink given to Network.Open, in order, from one goroutine. Sinks must not block.
type Event interface{ isEvent() }

// QRCode: a new QR code to show (the text to encode in the QR image). Codes rotate.
type QRCode struct{ Code string }

// QRTimeout: the QR codes ran out without a scan; Connect again for new ones.
type QRTimeout struct{}

// Paired: a phone scanned the QR or entered the pair code; Phone is its number (digits).
type Paired struct{ Phone string }

// Connected: the device is online and can send.
type Connected struct{ Phone string }

// Disconnected: the connection dropped. Reconnecting tells whether the client is reconnecting
// by itself (a transient drop) or stays down (stream replaced, temporary ban, outdated client).
type Disconnected struct {
	Reason       string
	Reconnecting bool
}

// LoggedOut: the device was unlinked (from the phone or by Logout); a new QR scan is needed.
type LoggedOut struct{ Reason string }

func (QRCode) isEvent()       {}
func (QRTimeout) isEvent()    {}
func (Paired) isEvent()       {}
func (Connected) isEvent()    {}
func (Disconnected) isEvent() {}
func (LoggedOut) isEvent()    {}

// Network opens clients, one per gateway session.
type Network interface {
	// Open returns the client of a gateway session, creating its device state if it has none.
	// Events are delivered to sink. Open does no network I/O.
	Open(sessionID string, sink func(Event)) (Client, error)
	// Close disconnects every client (pairings are kept).
	Close() error
}

// Client is one session's device on the network. Every method may do network I/O and is called
// from a worker goroutine, never from an actor's Receive.
type Client interface {
	// Connect connects a paired device, or starts linking an unpaired one (QRCode events
	// follow). It returns once the attempt has started; the outcome arrives as events.
	Connect(ctx context.Context) error
	// PairPhone starts linking by phone number instead of QR and returns the code the user
	// types on the phone (eight characters).
	PairPhone(ctx context.Context, phone string) (string, error)
	// IsOnNetwork tells whether a number has an account on the network.
	IsOnNetwork(ctx context.Context, phone string) (bool, error)
	// Send sends a message and waits for the network's acknowledgement.
	Send(ctx context.Context, m Message) (Receipt, error)
	// Logout unlinks the device; a new QR scan is needed afterwards.
	Logout(ctx context.Context) error
	// Disconnect closes the connection and keeps the pairing.
	Disconnect()
	// Paired tells whether the device is paired (linked to a phone), and to which phone.
	Paired() (phone string, ok bool)
}

// Errors reported by clients. Adapters wrap them with detail; callers test with errors.Is.
var (
	// ErrNotConnected: the device is not connected (not paired, or the link is down).
	ErrNotConnected = domain.E("session_not_connected", "session not connected to the network")
	// ErrNotOnNetwork: the recipient has no account on the network.
	ErrNotOnNetwork = errors.New("recipient is not on the network")
	// ErrTimelock: the network refuses messages to new contacts for now (reach-out timelock).
	ErrTimelock = errors.New("account is temporarily restricted from messaging new contacts")
	// ErrBanned: the account is temporarily banned.
	ErrBanned = errors.New("account is temporarily banned by the network")
	// ErrUnsupported: the network cannot send this kind of message.
	ErrUnsupported = errors.New("message kind not supported by the network")
	// ErrAlreadyPaired: linking was asked for a device that is already paired.
	ErrAlreadyPaired = errors.New("device is already paired")
)
