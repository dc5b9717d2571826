package sim

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gateway/gateway/domain"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/network"
)

// deliveries is the record of every delivered message: the journal deliveries.jsonl (one
// Delivered a line, in delivery order) and two in-memory indexes rebuilt from it on open.
//
// Memory per delivery is about 30 bytes (an 8-byte hash and offset in ids, an offset in byTo);
// records themselves, and never media bytes, stay on disk and are read back on demand.
//
// Each delivery is one write(2) under mu (see journal for why that is durable enough). Group
// commit (one writer for everyone's pending lines) was measured and dropped: on 2 cores a
// page-cache append takes about 1 µs, so batches held 1.1 lines on average and throughput did
// not change (about 400k sends/s either way, BenchmarkSendParallel).
type deliveries struct {
	seed  maphash.Seed // per process: the indexes are rebuilt from the journal at every open
	count atomic.Int64

	mu     sync.Mutex
	j      *journal
	closed bool
	// ids maps the hash of a delivered message id to its record's offset. A hit is confirmed
	// against the record on disk; an id whose hash another id already holds goes in collided.
	ids      map[uint64]int64
	collided map[string]int64
	byTo     map[string][]int64 // recipient → offsets of the records to it, in delivery order
}

// linePool holds the buffers deliveries are encoded into.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

type idAndTo struct {
	ID string `json:"id"`
	To string `json:"to"`
}

func openDeliveries(dir string, log *slog.Logger) (*deliveries, error) {
	d := &deliveries{
		seed:     maphash.MakeSeed(),
		ids:      make(map[uint64]int64),
		collided: make(map[string]int64),
		byTo:     make(map[string][]int64),
	}
	j, err := openJournal(filepath.Join(dir, "deliveries.jsonl"))
	if err != nil {
		return nil, err
	}
	d.j = j
	err = j.replay(log, func(off int64, line []byte) error {
		var r idAndTo
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.ID == "" {
			return errors.New("record without id")
		}
		if _, dup, err := d.find(r.ID); dup || err != nil {
			return fmt.Errorf("id %q delivered twice (%v)", r.ID, err) // cannot happen: keep the first
		}
		d.index(r.ID, r.To, off)
		return nil
	})
	if err != nil {
		j.close()
		return nil, err
	}
	return d, nil
}

// find returns the offset of id's record. An error means it cannot tell (a record it must
// check is unreadable): callers then fail rather than risk a second delivery. Called with mu
// held (or before d is shared).
func (d *deliveries) find(id string) (int64, bool, error) {
	off, ok := d.ids[maphash.String(d.seed, id)]
	if !ok {
		return 0, false, nil
	}
	r, err := d.readAt(off)
	if err != nil {
		return 0, false, err
	}
	if r.ID == id {
		return off, true, nil
	}
	off, ok = d.collided[id]
	return off, ok, nil
}

// index records that id was delivered to to at off. Called with mu held, after find said no.
func (d *deliveries) index(id, to string, off int64) {
	h := maphash.String(d.seed, id)
	if _, taken := d.ids[h]; taken {
		d.collided[strings.Clone(id)] = off
	} else {
		d.ids[h] = off
	}
	offs, ok := d.byTo[to]
	if !ok {
		to = strings.Clone(to) // do not pin the caller's larger string
	}
	d.byTo[to] = append(offs, off)
	d.count.Add(1)
}

func (d *deliveries) readAt(off int64) (domain.Delivered, error) {
	var r domain.Delivered
	line, err := d.j.readLineAt(off)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("sim: decode delivery at %d: %w", off, err)
	}
	return r, nil
}

// receipt returns the receipt of an already delivered id.
func (d *deliveries) receipt(id string) (network.Receipt, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return network.Receipt{}, false, errClosed
	}
	return d.receiptLocked(id)
}

func (d *deliveries) receiptLocked(id string) (network.Receipt, bool, error) {
	off, ok, err := d.find(id)
	if !ok || err != nil {
		return network.Receipt{}, false, err
	}
	r, err := d.readAt(off)
	if err != nil {
		return network.Receipt{}, false, err
	}
	return receiptOf(&r), true, nil
}

// receiptOf is the receipt of a delivery: the recipient's LID for a direct message.
func receiptOf(d *domain.Delivered) network.Receipt {
	r := network.Receipt{ID: d.ID, At: d.Timestamp}
	if d.Group == "" {
		r.LID = lidOf(d.To)
	}
	return r
}

// record returns the delivery of id.
func (d *deliveries) record(id string) (domain.Delivered, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return domain.Delivered{}, false, errClosed
	}
	off, ok, err := d.find(id)
	if !ok || err != nil {
		return domain.Delivered{}, false, err
	}
	r, err := d.readAt(off)
	return r, err == nil, err
}

// deliver records m unless its id was delivered before, in which case it returns the first
// delivery's receipt and records nothing (fresh false).
func (d *deliveries) deliver(m *domain.Delivered) (r network.Receipt, fresh bool, err error) {
	bp := linePool.Get().(*[]byte)
	line := append(appendDelivery((*bp)[:0], m), '\n') // outside the lock
	defer func() {
		if cap(line) <= 64<<10 {
			*bp = line
			linePool.Put(bp)
		}
	}()

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return network.Receipt{}, false, errClosed
	}
	if r, ok, err := d.receiptLocked(m.ID); ok || err != nil {
		return r, false, err
	}
	off, err := d.j.append(line)
	if err != nil {
		return network.Receipt{}, false, err
	}
	d.index(m.ID, m.To, off)
	return receiptOf(m), true, nil
}

// to returns the messages delivered to a number, in delivery order.
func (d *deliveries) to(number string) []domain.Delivered {
	d.mu.Lock()
	offs := append([]int64(nil), d.byTo[number]...)
	closed := d.closed
	d.mu.Unlock()
	out := make([]domain.Delivered, 0, len(offs))
	if closed {
		return out
	}
	for _, off := range offs {
		r, err := d.readAt(off)
		if err != nil {
			break // the network is closing under us, or the file was damaged: show what we have
		}
		out = append(out, r)
	}
	return out
}

func (d *deliveries) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.j.close()
}
