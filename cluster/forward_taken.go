package cluster

import (
	"slices"
	"time"

	"github.com/nats-io/nats.go"
)

// An owner remembers the forwarded requests it took, by id (Envelope.ID), so that a request
// sent again (its acknowledgement or its answer lost with a NATS server) runs once: the send
// again is acknowledged while the first run runs, and answered its answer after.

// takenReq is a forwarded request an owner took: the replies waiting for its answer, then the
// answer.
type takenReq struct {
	id      string
	at      time.Time
	replies []string
	answer  [][]byte // the answer's messages' data (nil while it runs)
	hdrs    []nats.Header
}

// takenFor is how long an owner remembers a request it took: longer than a request is held
// and sent again (3 × HoldMax) and than a signature is valid (ForwardMaxAge).
const takenFor = 3*HoldMax + 10*time.Second

// takenMax bounds the requests remembered (a burst beyond it forgets the oldest answered).
const takenMax = 200_000

// again registers reply for request id: false when id is new here (it is recorded as running,
// the caller runs it); true when it was taken already, the reply then acknowledged (running)
// or answered with the first run's answer.
func (f *forwarder) again(id, reply string) bool {
	now := time.Now()
	f.takenMu.Lock()
	for len(f.takenQ) > 0 && (now.Sub(f.takenQ[0].at) > takenFor || (len(f.takenQ) > takenMax && f.takenQ[0].answer != nil)) {
		t := f.takenQ[0]
		f.takenQ = f.takenQ[1:]
		if t.answer == nil && f.taken[t.id] == t {
			t.at = now // still running (a long synchronous bulk send): kept until it answers
			f.takenQ = append(f.takenQ, t)
			continue
		}
		if f.taken[t.id] == t {
			delete(f.taken, t.id)
		}
	}
	t := f.taken[id]
	if t == nil {
		t = &takenReq{id: id, at: now, replies: []string{reply}}
		f.taken[id] = t
		f.takenQ = append(f.takenQ, t)
		f.takenMu.Unlock()
		return false
	}
	answer, hdrs := t.answer, t.hdrs
	if answer == nil {
		t.replies = append(t.replies, reply)
	}
	f.takenMu.Unlock()
	if answer == nil {
		r := nats.NewMsg(reply)
		r.Header.Set(hdrReply, replyAck)
		r.Header.Set(hdrAlive, "1")
		_ = f.nc.PublishMsg(r)
		return true
	}
	for i, data := range answer {
		r := nats.NewMsg(reply)
		r.Header, r.Data = hdrs[i], data
		_ = f.nc.PublishMsg(r)
	}
	return true
}

// forget drops request id (it was not run here: sending it again may run it).
func (f *forwarder) forget(id string) {
	f.takenMu.Lock()
	delete(f.taken, id)
	f.takenMu.Unlock()
}

// replies is every reply subject waiting for request id's answer (reply alone when it is not
// recorded), and records the answer's messages for a request sent again later.
func (f *forwarder) replies(id, reply string, answer [][]byte, hdrs []nats.Header) []string {
	if id == "" {
		return []string{reply}
	}
	f.takenMu.Lock()
	defer f.takenMu.Unlock()
	t := f.taken[id]
	if t == nil {
		return []string{reply}
	}
	if answer != nil {
		t.answer, t.hdrs = answer, hdrs
	}
	return slices.Clone(t.replies)
}
