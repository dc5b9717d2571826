package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
)

// Forwarding: any node takes any request; one for a partition owned elsewhere crosses NATS
// request-reply to its owner, which answers it as if it had been asked itself.
//
// Each node serves one subject, <prefix>_fwd.n.<its instance id>, for its whole life; a
// request goes to the subject of the partition's owner as this node's view of the leases names
// it, with the partition in a header. (The subjects start with "<prefix>_fwd", not
// "<prefix>.", so a records stream on "<prefix>.>" never captures them.) A node that does
// not run the partition (a stale view, a hand-over, a paused former owner that woke up)
// answers "moved" without running it, so a request runs on one node at most. A request is
// one message: headers Gw-Fwd-V (the wire version), Gw-Partition, Gw-Chunks, and the
// payload: the envelope's JSON (length-prefixed) and the body. A body over ChunkSize goes in
// chunks: the owner answers the first with Gw-Reply: continue and a subject of its own
// (Gw-Xfer), the rest follow there in order. The answer comes back to the requester's inbox
// the same way (Gw-Reply: answer, in Gw-Chunks messages).
//
// The owner acknowledges at once (Gw-Reply: accepted, or continue), before running the
// request: a request NATS dropped (routed to a server whose subscriber just left) is found
// out within AckTimeout, not at the route's full timeout. Gw-Reply: moved says the node did
// not run the request, so it is safe to send again; so is NATS's own "no responders". A
// request acknowledged and then not answered in time may have run: that is a 503 the client
// retries (with its Idempotency-Key). While the request runs the owner acknowledges it again
// every KeepAlive (Gw-Keepalive on the first acknowledgement says it will): an answer lost on
// the way is found out within 3 × KeepAlive.

// Envelope is a request as the receiving node saw it, after authenticating it.
type Envelope struct {
	// Principal is who the receiving node authenticated (httpapi's type, JSON; opaque here).
	Principal json.RawMessage `json:"principal,omitempty"`
	// Route is the route pattern ("POST /api/v1/messages/send"); Path the request's path.
	Route  string `json:"route"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Header holds the request headers that matter to the route (Content-Type,
	// Idempotency-Key, X-Request-Id, signatures...), as received.
	Header []Header `json:"header,omitempty"`
	// Remote is the client's address (logs, per-client limits).
	Remote string `json:"remote,omitempty"`
	// Wait is the route's own longest wait (a sync bulk send's); the forward's timeout is
	// Wait + ForwardGrace.
	Wait time.Duration `json:"wait,omitempty"`
	Body []byte        `json:"-"`
}

// Header is one HTTP header.
type Header struct {
	Name  string `json:"n"`
	Value string `json:"v"`
}

// Response is the owner's answer, returned to the client as it is.
type Response struct {
	Status int      `json:"status"`
	Header []Header `json:"header,omitempty"`
	Body   []byte   `json:"-"`
}

// ErrLocal: while the request was held, its partition became this node's; run it here.
var ErrLocal = errors.New("cluster: the partition is owned by this node now")

// errNotServed: the request was not run: nobody serves the partition, or (errMoved) its
// owner is handing it over. Sending it again is safe.
var (
	errNotServed = errors.New("not served")
	errMoved     = fmt.Errorf("%w: the owner is handing the partition over", errNotServed)
)

const (
	hdrVersion = "Gw-Fwd-V"
	hdrChunks  = "Gw-Chunks"
	hdrSeq     = "Gw-Seq"
	hdrReply   = "Gw-Reply"
	hdrXfer    = "Gw-Xfer"
	hdrPart    = "Gw-Partition"
	hdrAlive   = "Gw-Keepalive"
	replyAck   = "accepted"
	replyCont  = "continue"
	replyAns   = "answer"
	replyMoved = "moved"
	replyErr   = "error"
	xferMaxAge = time.Minute
)

type forwarder struct {
	n        *Node
	nc       *nats.Conn
	subjPre  string // <prefix>_fwd.n. (+ a node's instance id: where its requests go)
	inbox    string // this node's reply subjects: inbox.<token>
	xferBase string // where the rest of chunked requests to this node go: xferBase.<token>
	chunk    int
	seq      atomic.Uint64
	subs     []*nats.Subscription

	mu      sync.Mutex
	pending map[string]chan *nats.Msg
	xfers   map[string]*xfer
}

type xfer struct {
	p       int
	reply   string
	meta    []byte
	body    []byte
	want    int
	got     int
	started time.Time
}

func newForwarder(n *Node) (*forwarder, error) {
	f := &forwarder{n: n, nc: n.cfg.Conn, subjPre: n.cfg.Prefix + "_fwd.n.", inbox: nats.NewInbox(),
		xferBase: n.cfg.Prefix + "_fwd.x." + n.instance, chunk: ChunkSize,
		pending: map[string]chan *nats.Msg{}, xfers: map[string]*xfer{}}
	if mp := int(f.nc.MaxPayload()); mp > 0 && f.chunk > mp-64<<10 {
		f.chunk = max(mp-64<<10, 32<<10)
	}
	sub, err := f.nc.Subscribe(f.inbox+".*", f.onReply)
	if err != nil {
		return nil, fmt.Errorf("cluster: forwarding inbox: %w", err)
	}
	f.subs = append(f.subs, sub)
	if n.cfg.Serve != nil {
		for subj, h := range map[string]nats.MsgHandler{f.subjPre + n.instance: f.onRequest, f.xferBase + ".*": f.onChunk} {
			if sub, err = f.nc.Subscribe(subj, h); err != nil {
				f.close()
				return nil, fmt.Errorf("cluster: forwarding: %w", err)
			}
			f.subs = append(f.subs, sub)
		}
		// The subscriptions are on the server before the node takes any partition.
		if err := f.nc.Flush(); err != nil {
			f.close()
			return nil, fmt.Errorf("cluster: forwarding: %w", err)
		}
	}
	return f, nil
}

func (f *forwarder) close() {
	for _, s := range f.subs {
		_ = s.Unsubscribe()
	}
}

// Forward sends a request of partition p to its owner and returns the owner's answer. While
// the partition is handed over gracefully (or its new owner is starting) the request is held,
// at most HoldMax, and sent again to the new owner. ErrLocal: the partition became this
// node's meanwhile (run the request here). Any other error is an *UnavailableError
// (domain.ErrNodeUnavailable: 503 with Retry-After): no owner, or the owner did not answer
// within req.Wait + ForwardGrace (the request may then have run: an Idempotency-Key makes the
// client's retry safe).
func (n *Node) Forward(ctx context.Context, p int, req *Envelope) (*Response, error) {
	if p < 0 || p >= len(n.parts) {
		return nil, fmt.Errorf("cluster: no partition %d", p)
	}
	first := time.Now()
	holdUntil := first.Add(HoldMax)
	for {
		if n.isActive(p) {
			return nil, ErrLocal
		}
		changed := n.view.changes()
		target, hold := n.target(p, time.Since(first))
		var err error
		if target != "" {
			var resp *Response
			resp, err = n.fwd.request(ctx, p, target, req)
			switch {
			case err == nil:
				n.metrics.forwarded("ok")
				return resp, nil
			case errors.Is(err, errMoved):
				hold = true // the node is not (or no longer) the owner: ask again
			case errors.Is(err, errNotServed):
				// Nobody serves that node's subject: it is gone, unless the view moves on.
			default:
				n.metrics.forwarded("unavailable")
				return nil, &UnavailableError{Partition: p, Reason: err.Error(), RetryAfter: time.Second}
			}
		}
		if !hold || time.Now().After(holdUntil) {
			n.metrics.forwarded("unavailable")
			reason := "no node serves it now"
			if err != nil {
				reason = err.Error()
			}
			return nil, &UnavailableError{Partition: p, Reason: reason, RetryAfter: time.Second}
		}
		t := time.NewTimer(min(100*time.Millisecond, time.Until(holdUntil)))
		select {
		case <-ctx.Done():
			t.Stop()
			n.metrics.forwarded("unavailable")
			return nil, &UnavailableError{Partition: p, Reason: ctx.Err().Error(), RetryAfter: time.Second}
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

func (n *Node) isActive(p int) bool {
	pt := n.parts[p]
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.state == stActive && n.freshLocked(pt)
}

// target is the node instance to send a request of partition p to, as the view names its
// owner, and whether to hold the request if there is none now (or it does not serve): while
// the lease says a graceful hand-over or a start is under way, or it was released and not yet
// taken. A lease that lapsed (its owner died) gets 503 at once.
func (n *Node) target(p int, held time.Duration) (instance string, hold bool) {
	s := n.view.lease(p)
	now := time.Now()
	switch {
	case s == nil || s.deleted:
		return "", true
	case !n.view.alive(s, now):
		return "", false
	case s.value.Instance == n.instance: // ours, starting or releasing here
		return "", true
	}
	return s.value.Instance, s.value.State == leaseStarting || s.value.State == leaseReleasing || held < 500*time.Millisecond
}

// request sends req once and waits for the answer.
func (f *forwarder) request(ctx context.Context, p int, target string, req *Envelope) (*Response, error) {
	meta, err := json.Marshal(struct {
		V int `json:"v"`
		*Envelope
	}{wireVersion, req})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, req.Wait+ForwardGrace)
	defer cancel()
	token := strconv.FormatUint(f.seq.Add(1), 36)
	replies := make(chan *nats.Msg, 64)
	f.mu.Lock()
	f.pending[token] = replies
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.pending, token)
		f.mu.Unlock()
	}()

	chunks := split(req.Body, f.chunk)
	m := nats.NewMsg(f.subjPre + target)
	m.Reply = f.inbox + "." + token
	m.Header.Set(hdrVersion, strconv.Itoa(wireVersion))
	m.Header.Set(hdrPart, strconv.Itoa(p))
	m.Header.Set(hdrChunks, strconv.Itoa(len(chunks)))
	m.Data = frame(meta, chunks[0])
	if err := f.nc.PublishMsg(m); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	var resp *Response
	var body [][]byte
	want := 0
	ack := time.NewTimer(AckTimeout)
	defer ack.Stop()
	// An owner that dies or is fenced while the request runs never answers: found out when
	// its lease lapses (or another holds it), not at the route's full wait (a synchronous bulk
	// send's may be hours).
	owner := time.NewTicker(500 * time.Millisecond)
	defer owner.Stop()
	acked, keepsAlive := false, false
	heard := time.Now()
	for {
		var r *nats.Msg
		select {
		case r = <-replies:
			heard = time.Now()
		case <-owner.C:
			if s := f.n.view.lease(p); !f.n.view.alive(s, time.Now()) || s.value.Instance != target {
				return nil, errors.New("the owner let the partition go before answering")
			}
			if keepsAlive && time.Since(heard) > 3*KeepAlive {
				return nil, errors.New("the owner's answer was lost")
			}
			continue
		case <-ack.C:
			if !acked {
				return nil, errors.New("the owner did not acknowledge the request")
			}
			continue
		case <-ctx.Done():
			return nil, fmt.Errorf("the owner did not answer in time: %w", ctx.Err())
		}
		acked = true
		if r == nil {
			return nil, errors.New("forward: answer lost (reply buffer full)")
		}
		if r.Header.Get("Status") == "503" { // NATS: no responders
			return nil, errNotServed
		}
		switch r.Header.Get(hdrReply) {
		case replyMoved:
			return nil, errMoved
		case replyErr:
			return nil, fmt.Errorf("the owner refused the request: %s", r.Data)
		case replyAck:
			keepsAlive = keepsAlive || r.Header.Get(hdrAlive) != ""
		case replyCont:
			xs := r.Header.Get(hdrXfer)
			for i := 1; i < len(chunks); i++ {
				c := nats.NewMsg(xs)
				c.Header.Set(hdrSeq, strconv.Itoa(i))
				c.Data = chunks[i]
				if err := f.nc.PublishMsg(c); err != nil {
					return nil, fmt.Errorf("forward: %w", err)
				}
			}
		case replyAns:
			seq, _ := strconv.Atoi(r.Header.Get(hdrSeq))
			if seq != len(body) {
				return nil, errors.New("forward: answer chunks out of order")
			}
			data := r.Data
			if seq == 0 {
				want, _ = strconv.Atoi(r.Header.Get(hdrChunks))
				rm, rest, err := unframe(data)
				if err != nil {
					return nil, err
				}
				resp = &Response{}
				if err := json.Unmarshal(rm, resp); err != nil {
					return nil, fmt.Errorf("forward: answer: %w", err)
				}
				data = rest
			}
			body = append(body, data)
			if len(body) >= want {
				resp.Body = join(body)
				return resp, nil
			}
		default:
			return nil, fmt.Errorf("forward: unknown reply %q", r.Header.Get(hdrReply))
		}
	}
}

// onReply routes an answer to the request waiting for it.
func (f *forwarder) onReply(m *nats.Msg) {
	token := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	f.mu.Lock()
	ch := f.pending[token]
	f.mu.Unlock()
	if ch == nil {
		return // gave up already
	}
	select {
	case ch <- m:
	default:
		select { // full: make the waiter fail rather than block every other answer
		case <-ch:
		default:
		}
		ch <- nil
	}
}

// onRequest takes a forwarded request.
func (f *forwarder) onRequest(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	p, err := strconv.Atoi(m.Header.Get(hdrPart))
	if err != nil || p < 0 || p >= len(f.n.parts) {
		f.answerErr(m.Reply, "forwarded request without a valid partition")
		return
	}
	if v, _ := strconv.Atoi(m.Header.Get(hdrVersion)); v < 1 || v > wireVersion {
		f.answerErr(m.Reply, fmt.Sprintf("forwarding version %q not supported (this node speaks up to %d)", m.Header.Get(hdrVersion), wireVersion))
		return
	}
	want, _ := strconv.Atoi(m.Header.Get(hdrChunks))
	meta, body, err := unframe(m.Data)
	if err != nil || want < 1 {
		f.answerErr(m.Reply, "malformed forwarded request")
		return
	}
	if want == 1 {
		f.start(p, m.Reply, meta, body)
		return
	}
	token := strconv.FormatUint(f.seq.Add(1), 36)
	now := time.Now()
	f.mu.Lock()
	for k, x := range f.xfers {
		if now.Sub(x.started) > xferMaxAge {
			delete(f.xfers, k)
		}
	}
	f.xfers[token] = &xfer{p: p, reply: m.Reply, meta: meta, body: append([]byte(nil), body...), want: want, got: 1, started: now}
	f.mu.Unlock()
	r := nats.NewMsg(m.Reply)
	r.Header.Set(hdrReply, replyCont)
	r.Header.Set(hdrXfer, f.xferBase+"."+token)
	_ = f.nc.PublishMsg(r)
}

// onChunk takes the next chunk of a request's body.
func (f *forwarder) onChunk(m *nats.Msg) {
	token := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	seq, _ := strconv.Atoi(m.Header.Get(hdrSeq))
	f.mu.Lock()
	x := f.xfers[token]
	if x == nil {
		f.mu.Unlock()
		return
	}
	if seq != x.got {
		delete(f.xfers, token)
		f.mu.Unlock()
		f.answerErr(x.reply, "request chunks out of order")
		return
	}
	x.body = append(x.body, m.Data...)
	x.got++
	done := x.got == x.want
	if done {
		delete(f.xfers, token)
	}
	f.mu.Unlock()
	if done {
		f.start(x.p, x.reply, x.meta, x.body)
	}
}

// start runs a forwarded request here if the partition still is this node's to serve
// (else it answers "moved": not run, safe to send again), acknowledging it first.
func (f *forwarder) start(p int, reply string, meta, body []byte) {
	var env Envelope
	if err := json.Unmarshal(meta, &env); err != nil {
		f.answerErr(reply, "malformed forwarded request")
		return
	}
	env.Body = body
	done, ok := f.n.Enter(p)
	r := nats.NewMsg(reply)
	if !ok {
		r.Header.Set(hdrReply, replyMoved)
		_ = f.nc.PublishMsg(r)
		return
	}
	r.Header.Set(hdrReply, replyAck)
	r.Header.Set(hdrAlive, "1")
	_ = f.nc.PublishMsg(r)
	go f.run(p, reply, &env, done)
}

// run answers a request let in by start, saying it still runs every KeepAlive.
func (f *forwarder) run(p int, reply string, env *Envelope, done func()) {
	ctx, cancel := context.WithTimeout(f.n.ctx, env.Wait+ForwardGrace)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(KeepAlive)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r := nats.NewMsg(reply)
				r.Header.Set(hdrReply, replyAck)
				_ = f.nc.PublishMsg(r)
			}
		}
	}()
	resp := f.n.cfg.Serve(ctx, p, env)
	close(stop)
	cancel()
	done()
	if resp == nil {
		resp = &Response{Status: 500}
	}
	rm, err := json.Marshal(resp)
	if err != nil {
		f.answerErr(reply, "encode answer")
		return
	}
	chunks := split(resp.Body, f.chunk)
	for i, c := range chunks {
		r := nats.NewMsg(reply)
		r.Header.Set(hdrReply, replyAns)
		r.Header.Set(hdrSeq, strconv.Itoa(i))
		if i == 0 {
			r.Header.Set(hdrChunks, strconv.Itoa(len(chunks)))
			c = frame(rm, c)
		}
		r.Data = c
		if err := f.nc.PublishMsg(r); err != nil {
			f.n.log.Warn("forwarded request: answer", "partition", p, "err", err)
			return
		}
	}
}

func (f *forwarder) answerErr(reply, msg string) {
	r := nats.NewMsg(reply)
	r.Header.Set(hdrReply, replyErr)
	r.Data = []byte(msg)
	_ = f.nc.PublishMsg(r)
}

// split cuts b into chunks of at most size bytes (one empty chunk for an empty body).
func split(b []byte, size int) [][]byte {
	if len(b) <= size {
		return [][]byte{b}
	}
	var out [][]byte
	for len(b) > 0 {
		k := min(size, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

// join is split's inverse; a one-chunk body (most answers) is not copied.
func join(parts [][]byte) []byte {
	if len(parts) == 1 {
		return parts[0]
	}
	return bytes.Join(parts, nil)
}

// frame puts a length-prefixed meta before data.
func frame(meta, data []byte) []byte {
	out := binary.AppendUvarint(make([]byte, 0, len(meta)+len(data)+4), uint64(len(meta)))
	return append(append(out, meta...), data...)
}

func unframe(b []byte) (meta, data []byte, err error) {
	l, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < l {
		return nil, nil, errors.New("forward: malformed frame")
	}
	return b[k : k+int(l)], b[k+int(l):], nil
}
