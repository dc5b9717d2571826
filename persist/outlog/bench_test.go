package outlog_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/internal/jsonenc"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/outlog"
)

// benchCallers is how many goroutines per CPU send at once (64 on 2 cores), as persist's
// BenchmarkOutboxWrites: about the send path's concurrency at 64 connections.
const benchCallers = 32

// BenchmarkSendRecords is a message's two outbox records, the accept (the caller waits for it)
// and the outcome (written in the background), through the outbox on Badger as the gateway
// writes them today (persist.Outbox: the accept's body, pending mark and history entry in one
// commit, the outcome through its background writer) and through this log (the accept with
// the position of its user's previous one, the outcome with its accept's), 64 callers, each
// store in both sync modes, and the making of the entries alone (both pay it). Both encode their records from the same entry by hand
// (internal/jsonenc). cpu-µs/msg is the process's CPU (every goroutine: Badger's writer and
// compactions, the log's writer) over the messages:
// `go test -run X -bench SendRecords -benchtime 200000x -benchmem ./persist/outlog`.
func BenchmarkSendRecords(b *testing.B) {
	b.Run("entries only", func(b *testing.B) {
		var seq atomic.Uint64
		runSends(b, func(pb *testing.PB) {
			for pb.Next() {
				e := benchEntry(seq.Add(1))
				e.NetworkID, e.SentAt, e.Attempts = e.ID, domain.MillisOf(time.Now()), 1
				e.SetStatus(domain.MsgSent, time.Now())
			}
		}, func() {})
	})
	for _, mode := range []outlog.Sync{outlog.SyncInterval, outlog.SyncBatch} {
		b.Run("badger/"+string(mode), func(b *testing.B) { benchBadger(b, persist.Fsync(mode)) })
		b.Run("outlog/"+string(mode), func(b *testing.B) { benchOutlog(b, mode, false) })
		b.Run("outlog+slot/"+string(mode), func(b *testing.B) { benchOutlog(b, mode, true) })
	}
}

func benchBadger(b *testing.B, fsync persist.Fsync) {
	kv, err := persist.OpenBadger(b.TempDir(), persist.BadgerOptions{Fsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	o := persist.NewOutbox(kv)
	var seq atomic.Uint64
	settled := func(err error) {
		if err != nil {
			b.Error(err)
		}
	}
	runSends(b, func(pb *testing.PB) {
		for pb.Next() {
			e := benchEntry(seq.Add(1))
			if err := o.Accept(context.Background(), &e, ""); err != nil {
				b.Error(err)
				return
			}
			e.NetworkID, e.SentAt, e.Attempts = e.ID, domain.MillisOf(time.Now()), 1
			e.SetStatus(domain.MsgSent, time.Now())
			o.Settle(e, settled)
		}
	}, o.Flush)
}

// benchOutlog is the log's side. With slot, each outcome also writes 24 bytes in place at its
// accept's end once written, from the log's writer goroutine, as step 2's status slot would
// (bench/README.md, "Tenth pass"): here into a scratch file of its own at the same offset, so
// the system call is paid and the accept's frame is left as it is.
func benchOutlog(b *testing.B, mode outlog.Sync, slot bool) {
	dir := b.TempDir()
	l, _, err := outlog.Open(dir, outlog.Options{Sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	scratch, err := os.Create(filepath.Join(dir, "slots"))
	if err != nil {
		b.Fatal(err)
	}
	defer scratch.Close()
	var seq atomic.Uint64
	// What step 2 keeps in memory: the users' history heads, and the pending messages (id to
	// accept position, dropped once the outcome is written), each a map behind one of 64 locks.
	type shard[V any] struct {
		sync.Mutex
		m map[string]V
	}
	var heads [64]shard[outlog.Pos]
	var pending [64]shard[outlog.Pos]
	for i := range heads {
		heads[i].m, pending[i].m = map[string]outlog.Pos{}, map[string]outlog.Pos{}
	}
	var outstanding sync.WaitGroup
	var bytes atomic.Int64
	runSends(b, func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			n := seq.Add(1)
			e := benchEntry(n)
			h := &heads[n%64]
			h.Lock()
			buf = appendAccept(buf[:0], &e, h.m[e.UserID])
			tk, err := l.Queue(buf)
			if err != nil {
				h.Unlock()
				b.Error(err)
				return
			}
			h.m[e.UserID] = tk.Pos
			h.Unlock()
			if err := tk.Wait(); err != nil {
				b.Error(err)
				return
			}
			ps := &pending[n%64]
			ps.Lock()
			ps.m[e.ID] = tk.Pos
			ps.Unlock()
			k := len(buf)
			e.NetworkID, e.SentAt, e.Attempts = e.ID, domain.MillisOf(time.Now()), 1
			e.SetStatus(domain.MsgSent, time.Now())
			buf = appendOutcome(buf[:0], &e, tk.Pos)
			bytes.Add(int64(k + len(buf)))
			outstanding.Add(1)
			accept, end, id := tk.Pos, int64(tk.Pos.Off())+int64(k), e.ID
			l.AppendAsync(buf, func(at outlog.Pos, err error) {
				if err == nil && slot {
					var sb [24]byte
					binary.LittleEndian.PutUint64(sb[:8], uint64(at))
					_, err = scratch.WriteAt(sb[:], end)
				}
				if err != nil {
					b.Error(err)
				}
				ps.Lock()
				if ps.m[id] == accept {
					delete(ps.m, id)
				}
				ps.Unlock()
				outstanding.Done()
			})
		}
	}, outstanding.Wait)
	b.ReportMetric(float64(bytes.Load())/float64(b.N), "record-bytes/msg")
}

// runSends runs send on 64 callers and reports the CPU per message; drain waits for the
// background writes.
func runSends(b *testing.B, send func(*testing.PB), drain func()) {
	start := cputime.Process()
	b.SetParallelism(benchCallers)
	b.ResetTimer()
	b.RunParallel(send)
	drain()
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/msg")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// benchEntry is message n as persist's benchmarks make it (benchSend): 100 users and
// sessions, a 110-byte text.
func benchEntry(n uint64) domain.OutboxEntry {
	var idb [10]byte
	binary.BigEndian.PutUint64(idb[:8], n*0x9E3779B97F4A7C15)
	id := "3EB0" + strings.ToUpper(hex.EncodeToString(idb[:]))
	now := time.Now()
	e := domain.OutboxEntry{ID: id, SessionID: fmt.Sprintf("sess-%02d", n%100), UserID: fmt.Sprintf("user-%02d", n%100),
		Origin: "api", From: "4915112345678", Message: domain.Message{ID: id, To: fmt.Sprintf("49151%07d", n%100000), Kind: domain.KindText,
			Text: "Hi Ana, your order #1001 has shipped. Track it at https://example.com/t/1001 - thanks for shopping with us!"},
		CreatedAt: domain.MillisOf(now)}
	e.SetStatus(domain.MsgQueued, now)
	return e
}

// appendAccept is an accept record as step 2 would write it: the fields persist's accept
// record holds, and the position of the user's previous accept (the history's chain).
func appendAccept(b []byte, e *domain.OutboxEntry, prev outlog.Pos) []byte {
	b = append(b, 'A')
	b = strconv.AppendUint(append(b, `{"prev":`...), uint64(prev), 10)
	b = jsonenc.AppendField(b, `,"id":`, e.ID)
	b = jsonenc.AppendField(b, `,"sessionId":`, e.SessionID)
	b = jsonenc.AppendField(b, `,"userId":`, e.UserID)
	b = jsonenc.AppendField(b, `,"origin":`, e.Origin)
	b = jsonenc.AppendField(b, `,"from":`, e.From)
	b = jsonenc.AppendField(b, `,"to":`, e.Message.To)
	b = jsonenc.AppendField(b, `,"type":`, string(e.Message.Kind))
	b = jsonenc.AppendField(b, `,"text":`, e.Message.Text)
	b = strconv.AppendInt(append(b, `,"createdAt":`...), int64(e.CreatedAt), 10)
	b = jsonenc.AppendField(b, `,"status":`, string(e.Status))
	return append(b, '}')
}

// appendOutcome is an outcome record as step 2 would write it: persist's outcome fields, and
// its accept's position instead of the history key.
func appendOutcome(b []byte, e *domain.OutboxEntry, accept outlog.Pos) []byte {
	b = append(b, 'O')
	b = strconv.AppendUint(append(b, `{"a":`...), uint64(accept), 10)
	b = jsonenc.AppendField(b, `,"id":`, e.ID)
	b = jsonenc.AppendField(b, `,"s":`, string(e.Status))
	b = jsonenc.AppendField(b, `,"n":`, e.NetworkID)
	b = strconv.AppendInt(append(b, `,"t":`...), int64(e.SentAt), 10)
	b = strconv.AppendInt(append(b, `,"at":`...), int64(e.Attempts), 10)
	b = strconv.AppendInt(append(b, `,"u":`...), int64(e.UpdatedAt), 10)
	b = append(b, `,"h":[`...)
	for i, st := range e.History {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendField(append(b, '{'), `"s":`, string(st.Status))
		b = strconv.AppendInt(append(b, `,"t":`...), int64(st.At), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
