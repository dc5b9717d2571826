package simhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Limits of the server's event queues.
const (
	// subscriberIdle: a subscriber that has not polled for this long is forgotten (its node
	// died); its sessions' events are dropped until a node takes them again.
	subscriberIdle = time.Minute
	// queueMax caps one subscriber's undelivered events (the oldest go first).
	queueMax = 100_000
	// pollMax is the most events one poll returns.
	pollMax = 1000
	// waitMax is the longest a poll waits for an event.
	waitMax = 30 * time.Second
)

// Server serves a network's port over HTTP (the `gateway sim` process mounts Handler under
// PathPrefix). It is safe for concurrent use.
type Server struct {
	net      network.Network
	log      *slog.Logger
	instance string
	closed   chan struct{} // Close: polls waiting for events answer at once
	once     sync.Once

	mu      sync.Mutex
	subs    map[string]*subscriber
	owner   map[string]string         // session → subscriber that holds it
	clients map[string]network.Client // session → its client (opened once, sink routes by owner)
}

type subscriber struct {
	id       string
	queue    []wireEvent
	next     uint64
	wake     chan struct{} // closed and replaced when an event is queued
	lastPoll time.Time
}

// NewServer serves net (the sim) over HTTP.
func NewServer(net network.Network, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Server{net: net, log: log, instance: hex.EncodeToString(b), closed: make(chan struct{}), subs: map[string]*subscriber{},
		owner: map[string]string{}, clients: map[string]network.Client{}}
}

// Close answers the polls waiting for events (call it before shutting the HTTP server down,
// which waits for every request to finish).
func (s *Server) Close() { s.once.Do(func() { close(s.closed) }) }

// Handler answers the port's routes under PathPrefix (404 elsewhere).
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	op, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		s.fail(ctx, fasthttp.StatusNotFound, wireError{Error: "no such route", Code: "not_found"})
		return
	}
	if op == "events" {
		s.events(ctx)
		return
	}
	if !ctx.IsPost() {
		s.fail(ctx, fasthttp.StatusMethodNotAllowed, wireError{Error: "POST only", Code: "method_not_allowed"})
		return
	}
	var c call
	if err := json.Unmarshal(ctx.PostBody(), &c); err != nil || c.Sub == "" || (c.Session == "" && op != "close") {
		s.fail(ctx, fasthttp.StatusBadRequest, wireError{Error: "a JSON body with sub and session is required", Code: "bad_request"})
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), callTimeout(ctx))
	defer cancel()
	var a answer
	var err error
	switch op {
	case "connect":
		err = s.with(c, true, func(cl network.Client) error { return cl.Connect(rctx) })
	case "pair-phone":
		err = s.with(c, true, func(cl network.Client) (e error) { a.Code, e = cl.PairPhone(rctx, c.Phone); return })
	case "logout":
		err = s.with(c, true, func(cl network.Client) error { return cl.Logout(rctx) })
	case "lookup":
		err = s.with(c, false, func(cl network.Client) (e error) { a.Checks, e = cl.Lookup(rctx, c.Phones); return })
	case "mark-read":
		if c.Ref == nil {
			err = errors.New("mark-read: ref is required")
			break
		}
		err = s.with(c, false, func(cl network.Client) error { return cl.MarkRead(rctx, *c.Ref) })
	case "groups":
		err = s.with(c, false, func(cl network.Client) (e error) { a.Groups, e = cl.Groups(rctx); return })
	case "create-group", "update-participants":
		err = s.with(c, false, func(cl network.Client) error {
			var g domain.Group
			var e error
			if op == "create-group" {
				g, e = cl.CreateGroup(rctx, c.Name, c.Phones)
			} else {
				g, e = cl.UpdateParticipants(rctx, c.Group, c.Add, c.Remove)
			}
			a.Group = &g
			return e
		})
	case "invite-link":
		err = s.with(c, false, func(cl network.Client) (e error) { a.Link, e = cl.InviteLink(rctx, c.Group); return })
	case "send":
		if c.Message == nil {
			err = errors.New("send: message is required")
			break
		}
		err = s.with(c, false, func(cl network.Client) error {
			r, e := cl.Send(rctx, *c.Message)
			if e == nil {
				a.Receipt = &r
			}
			return e
		})
	case "disconnect":
		s.disconnect(c)
	case "paired":
		cl, e := s.client(c.Session)
		if err = e; err == nil {
			a.Phone, a.OK = cl.Paired()
		}
	case "close":
		s.closeSub(c.Sub)
	default:
		s.fail(ctx, fasthttp.StatusNotFound, wireError{Error: "no such call " + strconv.Quote(op), Code: "not_found"})
		return
	}
	if err != nil {
		s.fail(ctx, fasthttp.StatusConflict, encodeError(err))
		return
	}
	s.reply(ctx, a)
}

// callTimeout: the caller's deadline (X-Timeout-Ms), at most a minute.
func callTimeout(ctx *fasthttp.RequestCtx) time.Duration {
	if ms, err := strconv.Atoi(string(ctx.Request.Header.Peek("X-Timeout-Ms"))); err == nil && ms > 0 {
		return min(time.Duration(ms)*time.Millisecond, time.Minute)
	}
	return time.Minute
}

func (s *Server) reply(ctx *fasthttp.RequestCtx, v any) {
	b, _ := json.Marshal(v)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (s *Server) fail(ctx *fasthttp.RequestCtx, status int, w wireError) {
	b, _ := json.Marshal(w)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// client returns a session's client, opening it on first use with a sink that routes its
// events to the session's current holder.
func (s *Server) client(session string) (network.Client, error) {
	s.mu.Lock()
	cl := s.clients[session]
	s.mu.Unlock()
	if cl != nil {
		return cl, nil
	}
	cl, err := s.net.Open(session, func(ev network.Event) { s.route(session, ev) })
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.clients[session] = cl
	s.mu.Unlock()
	return cl, nil
}

// with runs f on the session's client for subscriber c.Sub. take: the call takes the session
// over (Connect, PairPhone, Logout), and the previous holder hears that its link was
// replaced; else a subscriber that does not hold the session is answered ErrNotConnected.
func (s *Server) with(c call, take bool, f func(network.Client) error) error {
	cl, err := s.client(c.Session)
	if err != nil {
		return err
	}
	s.mu.Lock()
	sub := s.subscriberLocked(c.Sub)
	prev := s.owner[c.Session]
	switch {
	case prev == "" || prev == sub.id:
		s.owner[c.Session] = sub.id
	case take:
		s.owner[c.Session] = sub.id
		if old := s.subs[prev]; old != nil {
			s.queueLocked(old, c.Session, network.Disconnected{Reason: "another node connected this session",
				StatusReason: network.ReasonReplaced})
		}
		s.log.Info("session taken over", "session", c.Session, "from", prev, "to", sub.id)
	default:
		s.mu.Unlock()
		return fmt.Errorf("session %s is connected through another node: %w", c.Session, domain.ErrNotConnected)
	}
	s.mu.Unlock()
	return f(cl)
}

// disconnect takes the session offline, if c.Sub holds it (a node that lost the session
// must not cut the link of the node that has it now).
func (s *Server) disconnect(c call) {
	s.mu.Lock()
	cl := s.clients[c.Session]
	holds := s.owner[c.Session] == c.Sub
	s.mu.Unlock()
	if cl != nil && holds {
		cl.Disconnect()
	}
}

// closeSub is a node's Network.Close: its sessions go offline and it is forgotten.
func (s *Server) closeSub(sub string) {
	s.mu.Lock()
	var cls []network.Client
	for session, o := range s.owner {
		if o == sub {
			if cl := s.clients[session]; cl != nil {
				cls = append(cls, cl)
			}
			delete(s.owner, session)
		}
	}
	delete(s.subs, sub)
	s.mu.Unlock()
	for _, cl := range cls {
		cl.Disconnect()
	}
}

func (s *Server) subscriberLocked(id string) *subscriber {
	sub := s.subs[id]
	if sub == nil {
		sub = &subscriber{id: id, next: 1, wake: make(chan struct{}), lastPoll: time.Now()}
		s.subs[id] = sub
	}
	return sub
}

// route queues a session's event for its holder.
func (s *Server) route(session string, ev network.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.subs[s.owner[session]]; sub != nil {
		s.queueLocked(sub, session, ev)
	}
}

func (s *Server) queueLocked(sub *subscriber, session string, ev network.Event) {
	t, data, err := encodeEvent(ev)
	if err != nil {
		s.log.Error("sim: event not sent", "err", err)
		return
	}
	sub.queue = append(sub.queue, wireEvent{Seq: sub.next, Session: session, Type: t, Data: data})
	sub.next++
	if len(sub.queue) > queueMax {
		s.log.Warn("sim: a node's event queue is full; dropping its oldest events", "sub", sub.id)
		sub.queue = append(sub.queue[:0:0], sub.queue[len(sub.queue)-queueMax:]...)
	}
	close(sub.wake)
	sub.wake = make(chan struct{})
}

// events is the long poll: GET events?sub=ID&after=SEQ&wait=MS returns the subscriber's
// events after SEQ (acknowledging those up to it), waiting up to MS for one.
func (s *Server) events(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	id := string(args.Peek("sub"))
	if id == "" {
		s.fail(ctx, fasthttp.StatusBadRequest, wireError{Error: "sub is required", Code: "bad_request"})
		return
	}
	after, _ := strconv.ParseUint(string(args.Peek("after")), 10, 64)
	waitMS, _ := strconv.Atoi(string(args.Peek("wait")))
	wait := min(time.Duration(waitMS)*time.Millisecond, waitMax)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		s.expireLocked()
		sub := s.subscriberLocked(id)
		sub.lastPoll = time.Now()
		reset := after > 0 && after >= sub.next // a subscriber forgotten (or a sim restarted) meanwhile
		if reset {
			after = 0
		}
		i := 0
		for i < len(sub.queue) && sub.queue[i].Seq <= after {
			i++
		}
		sub.queue = sub.queue[i:]
		if len(sub.queue) > 0 || wait <= 0 || reset {
			out := poll{Instance: s.instance, Reset: reset, Events: append([]wireEvent(nil), sub.queue[:min(len(sub.queue), pollMax)]...)}
			s.mu.Unlock()
			s.reply(ctx, out)
			return
		}
		wake := sub.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			wait = 0
		case <-s.closed:
			wait = 0
		}
	}
}

// expireLocked forgets subscribers that stopped polling.
func (s *Server) expireLocked() {
	now := time.Now()
	for id, sub := range s.subs {
		if now.Sub(sub.lastPoll) > subscriberIdle {
			delete(s.subs, id)
		}
	}
}
