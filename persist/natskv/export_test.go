package natskv

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Abandon stops the store as a killed process would: the lease is not released and the
// connection just closes.
func (s *Store) Abandon() {
	s.lease = nil
	s.Close()
}

// Floor is the least last sequence a replica's answer to the view needs.
func (v *View) Floor() uint64 {
	v.floorMu.Lock()
	defer v.floorMu.Unlock()
	return v.floor
}

// PeakBatches is the most batch slots the store's dispatcher had in use at once.
func (s *Store) PeakBatches() int64 { return s.peakBatches.Load() }

// HoldGroups makes every group of stream k wait, before it is sent, until the returned release
// is called (as a stream electing a leader holds them); held is how many wait now.
func HoldGroups(k int) (release func(), held func() int) {
	hold := make(chan struct{})
	var n atomic.Int64
	hook := func(stream int) {
		if stream == k {
			n.Add(1)
			<-hold
			n.Add(-1)
		}
	}
	groupHook.Store(&hook)
	return func() {
		groupHook.Store(nil)
		close(hold)
	}, func() int { return int(n.Load()) }
}

// SetTimeouts sets the store's round-trip bound and its hold (Options.Timeout and Hold).
func (s *Store) SetTimeouts(timeout, hold time.Duration) { s.timeout, s.hold = timeout, hold }

// Leaders is each records stream's leader and the server the store is connected to.
func (s *Store) Leaders() (leaders []string, connected string) {
	for _, rs := range s.streams {
		info, err := rs.stream.Info(context.Background())
		if err != nil || info.Cluster == nil {
			leaders = append(leaders, "?")
			continue
		}
		leaders = append(leaders, info.Cluster.Leader)
	}
	return leaders, s.nc.ConnectedServerName()
}

// AfterRead runs fn once, between the reading of the next group's conditions and its publish
// (as another writer's commit landing there).
func AfterRead(fn func()) {
	var once atomic.Bool
	hook := func() {
		if once.CompareAndSwap(false, true) {
			readHook.Store(nil)
			fn()
		}
	}
	readHook.Store(&hook)
}

// DropAnswer drops, once, the answer of a direct get that carries key's record (in
// Options.Partition's partition), as nats.go drops an answer its subscription has no room for;
// dropped tells whether it did. The hook is removed when t ends.
func (s *Store) DropAnswer(t interface{ Cleanup(func()) }, key string) (dropped func() bool) {
	subj, err := s.subject("", []byte(key))
	if err != nil {
		panic(err)
	}
	var done atomic.Bool
	hook := func(m *nats.Msg) bool {
		return m.Header.Get(jetstream.SubjectHeader) != subj || !done.CompareAndSwap(false, true)
	}
	answerHook.Store(&hook)
	t.Cleanup(func() { answerHook.Store(nil) })
	return done.Load
}

// ScanPage and MultiGetMax: the most records a scan's page and a multi-subject read answer.
const (
	ScanPage    = scanPage
	MultiGetMax = multiGetMax
)

// ScanMaxBytes bounds the records' bytes of a scan's page.
const ScanMaxBytes = scanMaxBytes

// WatchPages records, for each direct get answered while t runs (one at a time: a scan's
// pages), how many records its answer held and their data's bytes.
func WatchPages(t interface{ Cleanup(func()) }) (pages func() (records, bytes []int)) {
	var mu sync.Mutex
	var recs, sizes []int
	n, size := 0, 0
	hook := func(m *nats.Msg) bool {
		mu.Lock()
		defer mu.Unlock()
		if st := m.Header.Get("Status"); len(m.Data) == 0 && st != "" {
			recs, sizes = append(recs, n), append(sizes, size)
			n, size = 0, 0
			return true
		}
		n++
		size += len(m.Data)
		return true
	}
	answerHook.Store(&hook)
	t.Cleanup(func() { answerHook.Store(nil) })
	return func() ([]int, []int) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(recs), slices.Clone(sizes)
	}
}

// HoldAnswers makes each direct get wait, once sent and before it reads an answer, until its
// subscription has had all the answers the server sends (total: how many the read gets), put in
// its channel or dropped, or 10 s have passed: the channel then holds the whole answer at once,
// as it does when the reader is slow. dropped is how many answers the subscriptions dropped.
// The hook is removed when t ends.
func HoldAnswers(t interface{ Cleanup(func()) }, total func() int) (dropped func() int) {
	var lost atomic.Int64
	hook := func(sub *nats.Subscription) {
		want := int64(total())
		var got int64
		var drop int
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			got, _ = sub.Delivered()
			drop, _ = sub.Dropped()
			if got+int64(drop) >= want {
				break
			}
		}
		lost.Add(int64(drop))
	}
	answersHook.Store(&hook)
	t.Cleanup(func() { answersHook.Store(nil) })
	return func() int { return int(lost.Load()) }
}

// ReadBeside queues a read of key for its stream's getter with anchor's subject asked beside
// it, as a fenced view's read asks its fence (anchor: a key; floor 0, so any answer is taken),
// and returns once it is queued; wait waits for its answer.
func (s *Store) ReadBeside(key, anchor string) (wait func() ([]byte, error)) {
	subj, err := s.subject("", []byte(key))
	if err != nil {
		panic(err)
	}
	asubj, err := s.subject("", []byte(anchor))
	if err != nil {
		panic(err)
	}
	r := &getReq{subject: subj, anchor: asubj, ctx: context.Background(), done: make(chan getResult, 1)}
	s.streamOfSubject(subj).gets <- r
	return func() ([]byte, error) {
		res := <-r.done
		if res.err != nil || res.rec.deleted {
			return nil, res.err
		}
		return res.rec.value, nil
	}
}

// QueuedReads is how many reads wait in the streams' getters' queues.
func (s *Store) QueuedReads() int {
	n := 0
	for _, rs := range s.streams {
		n += len(rs.gets)
	}
	return n
}

// HoldReads makes each direct get wait, once sent and before it reads its answers, until the
// returned release is called; held is how many wait now. The hook is removed by release.
func HoldReads() (release func(), held func() int) {
	hold := make(chan struct{})
	var n atomic.Int64
	hook := func(*nats.Subscription) {
		n.Add(1)
		<-hold
		n.Add(-1)
	}
	answersHook.Store(&hook)
	return func() {
		answersHook.Store(nil)
		close(hold)
	}, func() int { return int(n.Load()) }
}
