package natskv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Pipelined publishes' acks (piped.go), read from one subscription of the store's. nats.go's
// PublishMsgAsync costs every publish an ack future with its channels, a reply token drawn
// under a lock, a timer, an options struct and a copy of the message, and every ack a JSON
// decode by reflection: about 3-4 µs of CPU per one-message commit on one server, of 25-28
// for the client and the server together (bench/README.md, issue 27, branch r3node). Here a
// group of publishes registers once: its replies are <inbox>.<group>.<index> (one string for
// the group, sliced), one timer bounds the whole group, and an ack ({"stream":...,"seq":N}) is
// parsed by hand; an error answer, rare, is decoded as jetstream's API error, so the callers
// see what nats.go's publish returned.

// acker routes the acks of the store's pipelined publishes to their groups.
type acker struct {
	prefix string // <inbox>. : every reply subject starts so
	sub    *nats.Subscription

	mu     sync.Mutex
	next   uint64
	groups map[uint64]*ackGroup
}

// ackGroup is one publishAll's publishes waiting for their acks.
type ackGroup struct {
	out  []pubResult // each with its got: answered
	left int
	done chan struct{} // closed when every publish is answered
	// early, when it has commits (sendPiped's), answers a publish's commit to its caller at
	// once when its ack is a success, from this callback: the caller is not woken by the
	// group's goroutine after the group's last ack (one goroutine hop a commit fewer).
	early earlyAnswers
}

// newAcker subscribes to the store's ack inbox.
func newAcker(nc *nats.Conn) (*acker, error) {
	a := &acker{prefix: nc.NewInbox() + ".", groups: map[uint64]*ackGroup{}}
	// The acks waiting for the callback are at most the publishes in flight (the dispatcher's
	// groups: MaxInflight × MaxBatch), far under the subscription's default pending limits.
	sub, err := nc.Subscribe(a.prefix+">", a.handle)
	if err != nil {
		return nil, err
	}
	a.sub = sub
	return a, nil
}

// register makes a group of n publishes answered into out (and each success answered early,
// when early has commits), and their reply subjects.
func (a *acker) register(out []pubResult, early earlyAnswers) (uint64, *ackGroup, []string) {
	n := len(out)
	g := &ackGroup{out: out, left: n, done: make(chan struct{}), early: early}
	a.mu.Lock()
	a.next++
	id := a.next
	a.groups[id] = g
	a.mu.Unlock()
	buf := make([]byte, 0, n*(len(a.prefix)+24))
	for i := range n {
		buf = append(buf, a.prefix...)
		buf = strconv.AppendUint(buf, id, 10)
		buf = strconv.AppendInt(append(buf, '.'), int64(i), 10)
	}
	all := string(buf)
	// Reply i is the prefix, the group's id, a dot and i: its length is known, so the replies
	// are cut from all without noting where each ended.
	fixed := len(a.prefix) + decimalLen(id) + 1
	replies := make([]string, n)
	start := 0
	for i := range n {
		end := start + fixed + decimalLen(uint64(i))
		replies[i], start = all[start:end], end
	}
	return id, g, replies
}

// answer sets publish i of group id's result, once (nothing for a group given up). A success
// of a group with early answers is answered to its commit's caller here, under the lock: before
// the group's done is closed and before finish can give the group up, so the group's goroutine
// (and the dispatcher after it) sees every early answer made, as when it made them itself.
func (a *acker) answer(id uint64, i int, seq uint64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[id]
	if g == nil || i < 0 || i >= len(g.out) || g.out[i].got {
		return
	}
	if err == nil && i < len(g.early.reqs) {
		g.early.answer(i, seq)
	}
	g.out[i] = pubResult{seq: seq, err: err, got: true}
	if g.left--; g.left == 0 {
		delete(a.groups, id)
		close(g.done)
	}
}

// finish ends group id: every publish not answered yet gets err, and its waiter wakes. After
// it, the group's results are the waiter's alone.
func (a *acker) finish(id uint64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.groups[id]
	if g == nil {
		return
	}
	delete(a.groups, id)
	for i := range g.out {
		if !g.out[i].got {
			g.out[i] = pubResult{err: err, got: true}
		}
	}
	g.left = 0
	close(g.done)
}

// failAll ends every group in flight with err (the connection is moving: nats.go fails its
// async publishes with nats.ErrDisconnected so, sent or not).
func (a *acker) failAll(err error) {
	a.mu.Lock()
	ids := make([]uint64, 0, len(a.groups))
	for id := range a.groups {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.finish(id, err)
	}
}

// decimalLen is the number of decimal digits of v.
func decimalLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// handle is the subscription's callback: one ack.
func (a *acker) handle(m *nats.Msg) {
	if len(m.Subject) <= len(a.prefix) {
		return
	}
	id, i, ok := parseReply(m.Subject[len(a.prefix):])
	if !ok {
		return
	}
	seq, err := parseAck(m)
	if hook := ackHook.Load(); hook != nil {
		(*hook)(i)
	}
	a.answer(id, i, seq, err)
}

// ackHook, when set (tests only), runs in the ack callback before each ack is answered, with
// the publish's index in its group: a test holds an ack back there.
var ackHook atomic.Pointer[func(i int)]

// parseReply reads "<group>.<index>".
func parseReply(s string) (uint64, int, bool) {
	dot := -1
	for j := 0; j < len(s); j++ {
		if s[j] == '.' {
			dot = j
			break
		}
	}
	if dot <= 0 {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(s[:dot], 10, 64)
	i, err2 := strconv.Atoi(s[dot+1:])
	return id, i, err1 == nil && err2 == nil
}

var (
	ackSeq    = []byte(`"seq":`)
	ackStream = []byte(`"stream":"`)
	ackError  = []byte(`"error"`)
)

// parseAck is a publish's answer: its sequence, or the error nats.go's publish would return
// (jetstream.ErrNoStreamResponse for a no-responders status, the server's *jetstream.APIError).
func parseAck(m *nats.Msg) (uint64, error) {
	d := m.Data
	if len(d) == 0 {
		if m.Header.Get("Status") == "503" {
			return 0, jetstream.ErrNoStreamResponse
		}
		return 0, jetstream.ErrInvalidJSAck
	}
	if !bytes.Contains(d, ackError) && bytes.Contains(d, ackStream) {
		if k := bytes.Index(d, ackSeq); k >= 0 {
			var seq uint64
			j := k + len(ackSeq)
			for j < len(d) && d[j] == ' ' {
				j++
			}
			start := j
			for ; j < len(d) && d[j] >= '0' && d[j] <= '9'; j++ {
				seq = seq*10 + uint64(d[j]-'0')
			}
			if j > start && j-start < 20 && seq > 0 {
				return seq, nil
			}
		}
	}
	var r struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
	}
	if err := json.Unmarshal(d, &r); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, r.Error
	}
	if r.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return r.Seq, nil
}

// watchConn fails the pipelined publishes in flight when the connection starts to move, as
// nats.go does for its own: their answers will not come on this connection.
func (s *Store) watchConn() {
	ch := s.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	s.bg.Go(func() {
		defer s.nc.RemoveStatusListener(ch)
		for {
			select {
			case <-s.stop:
				return
			case st, ok := <-ch:
				if !ok {
					return
				}
				s.acks.failAll(fmt.Errorf("natskv: publish: %w", nats.ErrDisconnected))
				if st == nats.CLOSED {
					return
				}
			}
		}
	})
}

// publishAll publishes msgs without waiting between them and collects each one's ack, within
// the store's round-trip Timeout (a publish without an answer by then: nats.ErrTimeout). With
// early's commits (early.reqs[i] is msgs[i]'s), each publish acked successfully has its commit
// answered at once by the ack callback; the others are left to the caller, as every result is
// without.
func (rs *recStream) publishAll(msgs []*nats.Msg, early earlyAnswers) []pubResult {
	s := rs.s
	out := make([]pubResult, len(msgs))
	id, g, replies := s.acks.register(out, early)
	for i, m := range msgs {
		m.Reply = replies[i]
		err := s.nc.PublishMsg(m)
		m.Reply = ""
		if err != nil {
			s.acks.answer(id, i, 0, err)
		}
	}
	deadline := takeTimer(s.timeout)
	select {
	case <-g.done:
	case <-deadline.C:
	}
	putTimer(deadline)
	s.acks.finish(id, errPublishTimeout)
	return out
}

// deadlines are publishAll's stopped timers, used again: one timer a group, made once.
var deadlines sync.Pool

// takeTimer is a timer that fires after d, from deadlines or new.
func takeTimer(d time.Duration) *time.Timer {
	if t, ok := deadlines.Get().(*time.Timer); ok {
		t.Reset(d) // stopped by putTimer: since Go 1.23 no stale tick is left in its channel
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for the next takeTimer.
func putTimer(t *time.Timer) {
	t.Stop()
	deadlines.Put(t)
}

// errPublishTimeout answers a pipelined publish the server did not ack within the store's
// Timeout (one value: a group that was answered whole, the usual case, makes no error).
var errPublishTimeout = fmt.Errorf("natskv: publish: %w", nats.ErrTimeout)
