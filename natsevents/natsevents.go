// Package natsevents publishes the gateway's events to NATS JetStream (DESIGN.md section 20,
// `--events-nats`): every event on subject <prefix>.<userId>.<type> of a stream the gateway
// creates (7 days), the event id as Nats-Msg-Id (a message's status: an id made of the user,
// the message and the status, the same for every copy), so a consumer replays from any
// sequence or time and JetStream drops a second copy of an event it holds. It is the engine's EventForwarder:
// the engine keeps the events not yet acknowledged in its outbox and calls Forward with them in
// order until they are; nothing here is buffered or retried on its own.
//
// A server that is down never blocks the caller for long: the connection is made in the
// background (the gateway starts while NATS is down), nothing is buffered while disconnected
// (a publish then fails at once), and every wait is bounded by Options.Timeout.
//
// Imports: github.com/nats-io/nats.go and the gateway's domain; the core never imports it
// (main wires it), which TestImportAllowList checks.
package natsevents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsstream"
)

// DefaultPrefix is the subject prefix of --events-subject-prefix.
const DefaultPrefix = "gateway.events"

// Duplicates is the stream's de-duplication window: an event published again within it (the
// outbox's last page, after a kill -9 between the broker's acknowledgement and the outbox's
// removal) is dropped by JetStream; later, a consumer sees it twice under the same id.
const Duplicates = 2 * time.Minute

// startWait is how long Open waits for a server to answer before it leaves the connection to
// the background.
const startWait = 2 * time.Second

// Options configure a Publisher.
type Options struct {
	// URL is the NATS servers, comma-separated (--events-nats).
	URL string
	// Prefix starts every subject (DefaultPrefix when empty); the stream is named after it.
	Prefix string
	// Creds is a NATS credentials file, TLSCA the CA certificate of the servers' TLS.
	Creds, TLSCA string
	// Replicas of the stream when it is created (0: 3 on a NATS cluster, else 1).
	Replicas int
	// Timeout bounds a page's acknowledgements and each JetStream API call (default 10 s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Publisher publishes events to JetStream. Safe for concurrent use (a cluster node's
// partitions share one).
type Publisher struct {
	o      Options
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string

	mu    sync.Mutex
	ready bool // the stream is known to exist
}

// ErrConfig marks a refusal that waiting does not cure: a bad prefix, a stream the server
// refuses (its subjects overlap another stream's), JetStream not enabled.
var ErrConfig = errors.New("natsevents: configuration")

// Open connects to o.URL (in the background when no server answers yet) and makes sure the
// stream exists when a server answers within ctx. It fails only on what waiting does not cure
// (ErrConfig); an unreachable server is logged and tried again at each publish.
func Open(ctx context.Context, o Options) (*Publisher, error) {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	o.Timeout = cmp.Or(o.Timeout, 10*time.Second)
	if err := CheckPrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.URL == "" {
		return nil, fmt.Errorf("%w: no NATS URL", ErrConfig)
	}
	p := &Publisher{o: o, log: o.Logger, stream: StreamName(o.Prefix)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name("gateway events " + o.Prefix),
		nats.Timeout(o.Timeout),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// Nothing is buffered while disconnected: a publish fails at once and the events stay
		// in the outbox, instead of waiting in memory the outbox already holds.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				p.log.Warn("events NATS disconnected; events wait in the outbox", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { p.log.Info("events NATS reconnected", "server", nc.ConnectedUrlRedacted()) }),
	}
	opts = append(opts, jsstream.Auth(o.Creds, o.TLSCA)...)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %w", ErrConfig, o.URL, err)
	}
	p.nc = nc
	if p.js, err = jetstream.New(nc, jetstream.WithPublishAsyncTimeout(o.Timeout), jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		nc.Close()
		return nil, err
	}
	// A server that answers now: its refusal fails the start; none yet: tried at each publish.
	if waitConnected(ctx, nc, min(o.Timeout, startWait)) {
		if err := p.ensure(ctx); errors.Is(err, ErrConfig) {
			nc.Close()
			return nil, err
		} else if err != nil {
			p.log.Warn("events NATS: the stream is not ready yet; events wait in the outbox", "stream", p.stream, "err", err)
		}
	} else {
		p.log.Warn("events NATS unreachable; events wait in the outbox until it answers", "url", nc.Opts.Servers)
	}
	return p, nil
}

// waitConnected waits until nc is connected (at most d, or ctx).
func waitConnected(ctx context.Context, nc *nats.Conn, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !nc.IsConnected() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Close drops the connection (nothing is buffered in it).
func (p *Publisher) Close() {
	if p != nil && p.nc != nil {
		p.nc.Close()
	}
}

// Stream is the stream's name.
func (p *Publisher) Stream() string { return p.stream }

// ensure makes sure the stream exists: created when missing (7 days, the de-duplication window,
// replicas as Options.Replicas); one that exists is left as its operator configured it, as long
// as it captures the prefix's subjects.
func (p *Publisher) ensure(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	subject := p.o.Prefix + ".>"
	st, err := p.js.Stream(ctx, p.stream)
	switch {
	case err == nil:
		if cfg := st.CachedInfo().Config; !covers(cfg.Subjects, subject) {
			return fmt.Errorf("%w: stream %s exists with subjects %v, not %s: remove it or choose another --events-subject-prefix", ErrConfig, p.stream, cfg.Subjects, subject)
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		cfg := jetstream.StreamConfig{
			Name: p.stream, Description: "gateway events (--events-nats): every event of every user, " + domain.EventOutboxRetention.String(),
			Subjects: []string{subject}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
			MaxAge: domain.EventOutboxRetention, Duplicates: Duplicates, Discard: jetstream.DiscardOld,
			MaxMsgs: -1, MaxBytes: -1, AllowDirect: true,
		}
		if _, err = jsstream.Create(ctx, p.nc, p.js, &cfg, p.o.Replicas); err != nil {
			return p.classify("create stream "+p.stream, err)
		}
		p.log.Info("events NATS stream created", "stream", p.stream, "subjects", subject, "replicas", cfg.Replicas)
	default:
		return p.classify("stream "+p.stream, err)
	}
	p.ready = true
	return nil
}

// classify marks the refusals waiting does not cure as ErrConfig.
func (p *Publisher) classify(what string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("%w: %s: JetStream is not enabled on %s", ErrConfig, what, p.o.URL)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNameInUse:
		return fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == 10065: // subjects overlap
		return fmt.Errorf("%w: %s: its subjects %s.> overlap another stream's on this NATS account (with --store nats on the same server, --events-subject-prefix must not start with --nats-prefix): %w", ErrConfig, what, p.o.Prefix, err)
	case errors.As(err, &apiErr) && apiErr.Code == 400:
		return fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
	}
	return fmt.Errorf("natsevents: %s: %w", what, err)
}

// covers tells whether subjects capture every subject under want ("<prefix>.>").
func covers(subjects []string, want string) bool {
	for _, s := range subjects {
		if s == want || s == ">" {
			return true
		}
		if strings.HasSuffix(s, ".>") && strings.HasPrefix(want, strings.TrimSuffix(s, ">")) {
			return true
		}
	}
	return false
}

// Forward publishes evs in order, each under its id, and waits for the stream's
// acknowledgements (a repeat JetStream dropped counts as stored). It returns how many, from the
// first, are stored.
func (p *Publisher) Forward(ctx context.Context, evs []domain.EventRecord) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if !p.nc.IsConnected() {
		return 0, fmt.Errorf("natsevents: not connected to %s (%s)", p.o.URL, p.nc.Status())
	}
	if err := p.ensure(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	var sendErr error
	for _, ev := range evs {
		m := &nats.Msg{Subject: Subject(p.o.Prefix, ev.UserID, ev.Type), Data: ev.Body, Header: nats.Header{}}
		// A message's status has the same id each time it is published (DedupeID): the boot's
		// resend after a kill -9 publishes it again, and the duplicate window drops that copy.
		m.Header.Set(jetstream.MsgIDHeader, cmp.Or(ev.DedupeID, ev.ID))
		m.Header.Set("Gateway-Event-Id", ev.ID) // the SSE id and the webhooks' eventId, always
		m.Header.Set("Gateway-User-Id", ev.UserID)
		m.Header.Set("Gateway-Event-Type", string(ev.Type))
		f, err := p.js.PublishMsgAsync(m, jetstream.WithExpectStream(p.stream))
		if err != nil {
			sendErr = err
			break
		}
		futures = append(futures, f)
	}
	n, broken := 0, false
	var ackErr error
	for _, f := range futures {
		select {
		case <-f.Ok():
			if !broken {
				n++
			}
		case err := <-f.Err():
			broken = true
			ackErr = cmp.Or(ackErr, err)
		case <-ctx.Done():
			return n, fmt.Errorf("natsevents: no acknowledgement within %s: %w", p.o.Timeout, ctx.Err())
		}
	}
	err := cmp.Or(ackErr, sendErr)
	if err == nil {
		return n, nil
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		p.mu.Lock()
		p.ready = false // the stream was removed: make it again
		p.mu.Unlock()
	}
	return n, fmt.Errorf("natsevents: publish: %w", err)
}

// StreamName is the stream of prefix: its dots as underscores ("gateway.events":
// "gateway_events").
func StreamName(prefix string) string { return strings.ReplaceAll(prefix, ".", "_") }

// CheckPrefix refuses a subject prefix NATS would not take as literal tokens.
func CheckPrefix(prefix string) error {
	if prefix == "" || strings.HasPrefix(prefix, "$") {
		return fmt.Errorf("%w: --events-subject-prefix %q: empty, or starting with $ (NATS's own subjects)", ErrConfig, prefix)
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n/\\") {
			return fmt.Errorf("%w: --events-subject-prefix %q: want dot-separated tokens without wildcards, spaces or slashes", ErrConfig, prefix)
		}
	}
	return nil
}

// Subject is the subject of an event: <prefix>.<userId>.<type>, the user id one token
// (Token).
func Subject(prefix, uid string, t domain.EventType) string {
	return prefix + "." + Token(uid) + "." + string(t)
}

// Token turns a user id into one subject token: printable ASCII stays as it is, except '%',
// '.', '*' and '>', which, like spaces, control characters and bytes above 0x7e, become %XX
// (upper-case hex). Ids of the usual identity providers (letters, digits, - _ | @ :) are
// unchanged.
func Token(uid string) string {
	if uid == "" {
		return "%00"
	}
	var b strings.Builder
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		if c <= ' ' || c > '~' || c == '%' || c == '.' || c == '*' || c == '>' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
