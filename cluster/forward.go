package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
// Every request is signed (DESIGN.md section 19): Gw-Sig is an HMAC-SHA256, keyed from the
// cluster's secret (Config.Secret, from GATEWAY_SECRET_KEY), over the wire version, the
// partition, the time it was sent (Gw-Time, Unix ms), the body's SHA-256 (Gw-Body) and the
// envelope's JSON (principal, route, path, query, headers); the owner checks the signature
// before it takes the request, the body's hash once it has the whole body, and refuses a
// request more than ForwardMaxAge old (or new: clocks apart), or one it has seen already (a
// replay). So the right to publish on a forwarding subject is not the right to act as anyone
// (README, "Cluster": the NATS permissions a node needs).
//
// The owner acknowledges at once (Gw-Reply: accepted, or continue), before running the
// request: a request NATS dropped (routed to a server whose subscriber just left) is found
// out within AckTimeout, not at the route's full timeout. Gw-Reply: moved says the node did
// not run the request, so it is safe to send again; so is NATS's own "no responders". A
// request acknowledged and then not answered in time may have run: that is a 503 the client
// retries (with its Idempotency-Key). While the request runs the owner acknowledges it again
// every KeepAlive (Gw-Keepalive on the first acknowledgement says it will): an answer lost on
// the way is found out within 3 × KeepAlive, and the request asked again of the same owner.
// Every send of one request carries its id (Envelope.ID): an owner that took it already
// answers a send again with its first run's answer (forward_taken.go), so a request sent again
// after a lost acknowledgement, or asked again after a lost answer, runs once on its owner.

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
	// ID is the same for every send of one request (Forward sets it): an owner that took it
	// already (its acknowledgement lost with a NATS server, so the requester sent it again)
	// answers the first run's answer instead of running it twice.
	ID   string `json:"id,omitempty"`
	Body []byte `json:"-"`
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
	// NotRun: the owner stored nothing of the request (it lost the partition under it), so
	// Forward sends it again to the partition's next owner instead of answering.
	NotRun bool `json:"notRun,omitempty"`
}

// ErrLocal: while the request was held, its partition became this node's; run it here.
var ErrLocal = errors.New("cluster: the partition is owned by this node now")

// errNotServed: the request was not run: nobody serves the partition, or (errMoved) its
// owner is handing it over. Sending it again is safe.
var (
	errNotServed = errors.New("not served")
	errMoved     = fmt.Errorf("%w: the owner is handing the partition over", errNotServed)
	// errAnswerLost: the owner took the request and then went silent (it died, or its
	// connection moved to another NATS server with the answer): the request may have run.
	errAnswerLost = errors.New("the owner's answer was lost")
)

const (
	hdrVersion = "Gw-Fwd-V"
	hdrChunks  = "Gw-Chunks"
	hdrSeq     = "Gw-Seq"
	hdrReply   = "Gw-Reply"
	hdrXfer    = "Gw-Xfer"
	hdrPart    = "Gw-Partition"
	hdrAlive   = "Gw-Keepalive"
	hdrTime    = "Gw-Time"
	hdrBody    = "Gw-Body"
	hdrSig     = "Gw-Sig"
	replyAck   = "accepted"
	replyCont  = "continue"
	replyAns   = "answer"
	replyMoved = "moved"
	replyErr   = "error"
	xferMaxAge = time.Minute
)

// keepAliveMaxSilence is how long a forwarded request waits on an owner that heartbeats but
// sends no keep-alive before it takes the answer for lost.
const keepAliveMaxSilence = 15 * time.Second

// ForwardMaxAge is how far a forwarded request's signing time may be from the owner's clock.
const ForwardMaxAge = 30 * time.Second

type forwarder struct {
	n   *Node
	nc  *nats.Conn
	key []byte // the signing key (derived from Config.Secret)
	// The signatures taken (replays refused): this window's and the last one's, each
	// 2 × ForwardMaxAge long, so every signature young enough to pass is remembered.
	seenMu    sync.Mutex
	seen      map[string]struct{}
	seenPrev  map[string]struct{}
	seenSince time.Time
	subjPre   string // <prefix>_fwd.n. (+ a node's instance id: where its requests go)
	inbox     string // this node's reply subjects: inbox.<token>
	xferBase  string // where the rest of chunked requests to this node go: xferBase.<token>
	chunk     int
	seq       atomic.Uint64
	subs      []*nats.Subscription

	mu      sync.Mutex
	pending map[string]chan *nats.Msg
	xfers   map[string]*xfer

	// The requests taken here by id (Envelope.ID), running or answered within takenFor: a
	// request sent again is answered by its first run.
	takenMu sync.Mutex
	taken   map[string]*takenReq
	takenQ  []*takenReq // in the order taken, for expiry
}

type xfer struct {
	p       int
	sum     []byte // the body's SHA-256, as signed
	reply   string
	meta    []byte
	body    []byte
	want    int
	got     int
	started time.Time
}

func newForwarder(n *Node) (*forwarder, error) {
	f := &forwarder{n: n, nc: n.cfg.Conn, key: forwardKey(n.cfg.Secret), seen: map[string]struct{}{}, seenSince: time.Now(),
		subjPre: n.cfg.Prefix + "_fwd.n.", inbox: n.cfg.Conn.NewInbox(),
		xferBase: n.cfg.Prefix + "_fwd.x." + n.instance, chunk: ChunkSize,
		pending: map[string]chan *nats.Msg{}, xfers: map[string]*xfer{}, taken: map[string]*takenReq{}}
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
	// A node leaves once every request it took has been answered (each holds its partition,
	// which is handed over only then): one still running here is an answer its requester
	// will miss (503 "the owner's answer was lost").
	f.takenMu.Lock()
	var running []string
	for id, t := range f.taken {
		if t.answer == nil {
			running = append(running, id)
		}
	}
	f.takenMu.Unlock()
	if len(running) > 0 {
		f.n.log.Warn("leaving with forwarded requests not answered", "requests", running)
	}
}

// Forward sends a request of partition p to its owner and returns the owner's answer. While
// no node serves the partition (handed over gracefully, its new owner starting, its owner lost
// and its lease not yet lapsed or taken, every lease lapsed while NATS elects a leader), the
// request is held, at most HoldMax, and sent to the new owner once there is one: clients see
// latency, not errors (DESIGN.md section 19). ErrLocal: the partition became this node's
// meanwhile (run the request here). Any other error is an *UnavailableError
// (domain.ErrNodeUnavailable: 503 with Retry-After): no owner within HoldMax, or the owner took
// the request and did not answer within req.Wait + ForwardGrace (the request may then have
// run: an Idempotency-Key makes the client's retry safe).
func (n *Node) Forward(ctx context.Context, p int, req *Envelope) (*Response, error) {
	if p < 0 || p >= len(n.parts) {
		return nil, fmt.Errorf("cluster: no partition %d", p)
	}
	first := time.Now()
	holdUntil := first.Add(HoldMax)
	if req.ID == "" {
		req.ID = randomID() + randomID()
	}
	for {
		if n.isActive(p) {
			return nil, ErrLocal
		}
		changed := n.view.changes()
		target := n.target(p)
		var err error
		if target != "" {
			var resp *Response
			resp, err = n.fwd.request(ctx, p, target, req)
			if errors.Is(err, errAnswerLost) {
				resp, err = n.fwd.askAgain(ctx, p, target, req)
			}
			switch {
			case err == nil && resp.NotRun:
				err = fmt.Errorf("%w: the owner lost the partition under the request", errNotServed)
				// The run itself may have waited (for the store): held again from now, 3 ×
				// HoldMax in all.
				if again := time.Now().Add(HoldMax); again.After(holdUntil) {
					holdUntil = again
				}
				if end := first.Add(3 * HoldMax); holdUntil.After(end) {
					holdUntil = end
				}
			case err == nil:
				n.metrics.forwarded("ok")
				return resp, nil
			case errors.Is(err, errNotServed):
				// Not run (moved, nobody subscribed, never acknowledged): ask again once the
				// view moves on.
			default:
				n.metrics.forwarded("unavailable")
				return nil, &UnavailableError{Partition: p, Reason: err.Error(), RetryAfter: time.Second}
			}
		}
		if now := time.Now(); now.After(holdUntil) && n.holdLonger(p, now) {
			// Its owner is still booting it, or NATS itself was lost a moment ago (no lease
			// could be written while a stream elected its leader): a new owner is on its way.
			// Held on, 3 × HoldMax in all.
			holdUntil = now.Add(time.Second)
			if end := first.Add(3 * HoldMax); holdUntil.After(end) {
				holdUntil = end
			}
		}
		if time.Now().After(holdUntil) {
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

// holdLonger tells whether a request of partition p held past HoldMax is worth holding on:
// the partition's lease says its owner is starting it (booting its records, slow while a
// records stream elects its leader), this node's view of the leases is behind (its watcher lost
// its NATS server), or this node's own writes to the cluster's buckets failed within the last
// HoldMax (NATS lost a server: nobody could take the partition while its streams elected their
// leaders). Fencing is not touched: the request still runs only on an active owner.
func (n *Node) holdLonger(p int, now time.Time) bool {
	if s := n.view.lease(p); s != nil && !s.deleted && !s.lapsed && s.value.State == leaseStarting {
		return true
	}
	pt := n.parts[p]
	pt.mu.Lock()
	starting := pt.state == stStarting || (pt.state == stFree && pt.busy)
	pt.mu.Unlock()
	if starting {
		return true
	}
	n.view.mu.Lock()
	behind := now.Sub(n.view.lastLease) > n.cfg.LeaseTTL
	n.view.mu.Unlock()
	failed := n.natsFailedAt.Load()
	return behind || (failed != 0 && now.Sub(time.Unix(0, failed)) < HoldMax)
}

func (n *Node) isActive(p int) bool {
	pt := n.parts[p]
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.state == stActive && n.freshLocked(pt)
}

// target is the node instance to send a request of partition p to, as the view names its
// owner: "" while there is none that serves (released, lapsed, or this node's own, starting or
// releasing), and while the owner is starting (it would answer "moved"). A lease the view has
// not seen renewed for a while, but that did not lapse either (no marker), may be a watcher
// behind (a NATS server lost under it): its holder is asked; a dead one answers nothing (no
// responders, or no acknowledgement), and the request is held and asked again.
func (n *Node) target(p int) (instance string) {
	s := n.view.lease(p)
	switch {
	case s == nil || s.deleted || s.lapsed:
		return ""
	case s.value.Instance == n.instance, s.value.State == leaseStarting:
		return ""
	}
	return s.value.Instance
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
	f.sign(m.Header, p, m.Reply, meta, req.Body)
	m.Data = frame(meta, chunks[0])
	if err := f.nc.PublishMsg(m); err != nil {
		// Not sent (the connection is moving to another server): safe to send again.
		return nil, fmt.Errorf("%w: forward: %w", errNotServed, err)
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
			if keepsAlive {
				// The owner runs the request and says so every KeepAlive: its answer decides,
				// even if it loses the partition meanwhile (a NATS server's loss fences every
				// owner for a moment): it then answers what became of the request (not run:
				// sent again to the next owner). Silence alone is no proof of death (its
				// connection may be moving to another NATS server, its keep-alives buffered
				// meanwhile): the owner is lost once its heartbeat is gone (lapsed, deleted,
				// or its node id up under another process), or after keepAliveMaxSilence.
				if silent := time.Since(heard); silent > 3*KeepAlive && (silent > keepAliveMaxSilence || f.n.view.instanceGone(target)) {
					f.n.log.Warn("forwarded request: the owner went silent", "partition", p, "owner", target, "request", req.ID,
						"route", req.Route, "silent_ms", silent.Milliseconds(), "owner_gone", f.n.view.instanceGone(target))
					return nil, errAnswerLost
				}
				continue
			}
			// Only what the view knows for sure: another holder, a release, a lapse marker (a
			// view behind its watcher says nothing).
			if s := f.n.view.lease(p); s == nil || s.deleted || s.lapsed || s.value.Instance != target {
				if !acked {
					return nil, fmt.Errorf("%w: the owner let the partition go", errNotServed)
				}
				return nil, errors.New("the owner let the partition go before answering")
			}
			continue
		case <-ack.C:
			if !acked {
				// The owner acknowledges before it runs a request: not run, safe to send again.
				return nil, fmt.Errorf("%w: the owner did not acknowledge the request", errNotServed)
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
					// The owner runs a request only once it has every chunk: not run.
					return nil, fmt.Errorf("%w: forward: %w", errNotServed, err)
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

// askAgainTries bounds how often askAgain sends a request whose answer was lost.
const askAgainTries = 5

// askAgain sends a request whose answer was lost to the same owner again, a few times: an
// owner that took it answers its first run's answer (or says it still runs) instead of running
// it twice, so a live owner whose connection moved to another NATS server answers after all.
// "moved" says the owner never took it (not run: sent on to the partition's owner); an owner
// that stays silent may have run it and died: errAnswerLost (503, the client retries with its
// Idempotency-Key). The request never goes to another node from here.
func (f *forwarder) askAgain(ctx context.Context, p int, target string, req *Envelope) (*Response, error) {
	for try := 1; try <= askAgainTries; try++ {
		select {
		case <-ctx.Done():
			return nil, errAnswerLost
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
		resp, err := f.request(ctx, p, target, req)
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, errMoved):
			return nil, err
		case errors.Is(err, errNotServed), errors.Is(err, errAnswerLost):
		default:
			return nil, err
		}
	}
	return nil, errAnswerLost
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
	bodySum, err := f.verify(m.Header, p, m.Reply, meta)
	if err != nil {
		f.n.log.Warn("refused a forwarded request: "+err.Error()+" (is GATEWAY_SECRET_KEY the same on every node? is anything else publishing on the forwarding subjects?)", "partition", p)
		f.answerErr(m.Reply, "forwarded request refused: "+err.Error())
		return
	}
	if want == 1 {
		f.start(p, m.Reply, meta, body, bodySum)
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
	f.xfers[token] = &xfer{p: p, reply: m.Reply, meta: meta, body: append([]byte(nil), body...), want: want, got: 1, started: now, sum: bodySum}
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
		f.start(x.p, x.reply, x.meta, x.body, x.sum)
	}
}

// start runs a forwarded request here if the partition still is this node's to serve
// (else it answers "moved": not run, safe to send again), acknowledging it first. The body's
// hash must be the one signed.
func (f *forwarder) start(p int, reply string, meta, body, sum []byte) {
	if got := sha256.Sum256(body); !hmac.Equal(got[:], sum) {
		f.n.log.Warn("refused a forwarded request: its body is not the one signed", "partition", p)
		f.answerErr(reply, "forwarded request refused: its body is not the one signed")
		return
	}
	var env Envelope
	if err := json.Unmarshal(meta, &env); err != nil {
		f.answerErr(reply, "malformed forwarded request")
		return
	}
	env.Body = body
	if env.ID != "" && f.again(env.ID, reply) {
		return // taken already: its first run answers this reply too
	}
	done, ok := f.n.Enter(p)
	r := nats.NewMsg(reply)
	if !ok {
		if env.ID != "" {
			f.forget(env.ID)
		}
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
				for _, to := range f.replies(env.ID, reply, nil, nil) {
					r := nats.NewMsg(to)
					r.Header.Set(hdrReply, replyAck)
					_ = f.nc.PublishMsg(r)
				}
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
	hdrs := make([]nats.Header, len(chunks))
	for i, c := range chunks {
		h := nats.Header{}
		h.Set(hdrReply, replyAns)
		h.Set(hdrSeq, strconv.Itoa(i))
		if i == 0 {
			h.Set(hdrChunks, strconv.Itoa(len(chunks)))
			chunks[i] = frame(rm, c)
		}
		hdrs[i] = h
	}
	to := f.replies(env.ID, reply, chunks, hdrs)
	if resp.NotRun && env.ID != "" {
		f.forget(env.ID) // it stored nothing: sent again, it runs again (on the next owner)
	}
	for _, to := range to {
		for i, c := range chunks {
			r := nats.NewMsg(to)
			r.Header, r.Data = hdrs[i], c
			if err := f.nc.PublishMsg(r); err != nil {
				f.n.log.Warn("forwarded request: answer", "partition", p, "err", err)
				break
			}
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

// forwardKey derives the forwarding signatures' key from the cluster's secret, so the secret
// itself (which also seals stored credentials) never keys anything else.
func forwardKey(secret []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gateway cluster forwarding v1"))
	return h.Sum(nil)
}

// signature is the HMAC of a request: its wire version, partition, reply subject (unique per
// send: a request sent again is signed again), signing time, body hash and envelope.
func (f *forwarder) signature(version string, p int, reply, at string, bodySum, meta []byte) []byte {
	h := hmac.New(sha256.New, f.key)
	for _, part := range [][]byte{[]byte(version), []byte(strconv.Itoa(p)), []byte(reply), []byte(at), bodySum, meta} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// sign sets a request's signing headers (after its version header).
func (f *forwarder) sign(h nats.Header, p int, reply string, meta, body []byte) {
	sum := sha256.Sum256(body)
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	h.Set(hdrTime, at)
	h.Set(hdrBody, hex.EncodeToString(sum[:]))
	h.Set(hdrSig, hex.EncodeToString(f.signature(h.Get(hdrVersion), p, reply, at, sum[:], meta)))
}

// verify checks a request's signature, its age and that it was not taken before; it returns
// the body hash the signature covers.
func (f *forwarder) verify(h nats.Header, p int, reply string, meta []byte) ([]byte, error) {
	sig, err := hex.DecodeString(h.Get(hdrSig))
	if err != nil || len(sig) == 0 {
		return nil, errors.New("not signed")
	}
	sum, err := hex.DecodeString(h.Get(hdrBody))
	if err != nil || len(sum) != sha256.Size {
		return nil, errors.New("no body hash")
	}
	at := h.Get(hdrTime)
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, errors.New("no signing time")
	}
	if !hmac.Equal(sig, f.signature(h.Get(hdrVersion), p, reply, at, sum, meta)) {
		return nil, errors.New("bad signature")
	}
	now := time.Now()
	if d := now.Sub(time.UnixMilli(ms)); d > ForwardMaxAge || d < -ForwardMaxAge {
		return nil, fmt.Errorf("signed %v from this node's clock (at most %v)", d.Round(time.Millisecond), ForwardMaxAge)
	}
	key := string(sig)
	f.seenMu.Lock()
	defer f.seenMu.Unlock()
	if now.Sub(f.seenSince) > 2*ForwardMaxAge {
		f.seenPrev, f.seen, f.seenSince = f.seen, map[string]struct{}{}, now
	}
	_, dup := f.seen[key]
	if _, dupPrev := f.seenPrev[key]; dup || dupPrev {
		return nil, errors.New("a replay of a request taken already")
	}
	f.seen[key] = struct{}{}
	return sum, nil
}
