package httpapi

import (
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/internal/jsonenc"
)

// The access log: one line per request, in the format of the gateway's other logs (slog's JSON
// or text handler, level INFO, msg "request"), on by default. A request only appends a small
// record to a queue; a goroutine formats the queued records by hand and writes them in one
// write every accessFlushDelay, or as soon as accessBatch are queued. Through slog, the line
// cost 22 % of the CPU of the cheapest route under load (a JSON handler and a write(2) per
// request, issue 21).

// AccessLogConfig is where and how the access log is written (Config.AccessLog).
type AccessLogConfig struct {
	// Output receives whole lines, many per Write. Share it with the other logs through a
	// writer that serialises Writes (LockedWriter), so lines never interleave.
	Output io.Writer
	// Text: slog's text format (key=value); else JSON.
	Text bool
	// Attrs are written after msg on every line, as the logger's With would (component=http).
	Attrs [][2]string
}

// LockedWriter serialises Writes to W: the logger and the access log share it, and each Write
// holds whole lines, so no line is torn.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}

// Access log limits.
const (
	// accessFlushDelay: records wait at most this long; a busy server writes one batch per
	// delay (hundreds of lines) instead of one line per request.
	accessFlushDelay = 20 * time.Millisecond
	// accessMaxQueued bounds the queue when the output cannot keep up (a blocked pipe):
	// further records are dropped and counted, never waited for.
	accessMaxQueued = 1 << 16
	// accessWriteChunk: a write holds whole lines, about this much (a busy second's batch of
	// 20 ms is some hundred lines).
	accessWriteChunk = 256 << 10
	// accessBatch records are written without waiting for the delay: at tens of thousands of
	// requests a second a batch is then about 60 KB of lines, which a pipe's default 64 KiB
	// buffer takes in one write that does not block (a 20 ms batch was 300-400 KB, written in
	// blocking pieces as the reader drained the pipe), and the records and lines a batch
	// touches stay in the cores' caches, shared with the requests.
	accessBatch = 256
	// accessFileBatch is accessBatch when the output is a regular file (a log file, or the
	// bench's): no reader drains a file, and the kernel's cost per byte of a write into the
	// page cache falls with the write's size (bigger folios, fewer per-write inode updates):
	// 0.18 µs a line in 60 KB writes, 0.12 in 240 KB ones (bench/README.md, eighth pass). At
	// tens of thousands of requests a second the 20 ms delay comes first: one write of some
	// 150 KB per delay.
	accessFileBatch = 1024
)

// accessRecord is what a request leaves for the access log.
type accessRecord struct {
	at time.Time
	// id is the caller's request id; else it is the server's prefix and seq (appendRequestID),
	// formatted here and not on the request's path.
	id       string
	seq      uint64
	route    *accessRoute
	status   int
	duration time.Duration
	remote   net.IP
	// remoteText is remote as text (net.IP's String), formatted as its connection was
	// accepted (lingerConn); "": remote is formatted here.
	remoteText string
}

// accessRoute is a route's method and path, and their attributes as a line writes them in each
// format, rendered once when the route is registered (a line only copies them).
type accessRoute struct {
	method, path string
	json, text   []byte
}

func newAccessRoute(method, path string) *accessRoute {
	r := &accessRoute{method: method, path: path}
	for _, text := range []bool{false, true} {
		l := accessLog{cfg: AccessLogConfig{Text: text}}
		b := l.appendAttr(l.appendAttr(nil, "method", method), "route", path)
		if text {
			r.text = b
		} else {
			r.json = b
		}
	}
	return r
}

// accessLog queues records and writes them from its own goroutine.
type accessLog struct {
	cfg    AccessLogConfig
	prefix []byte // the attrs, formatted once
	reqPfx string // the server's request id prefix (Server.reqPfx)
	// reqHead is what a request's line holds between its time and the number of a request id
	// the server made, formatted once: the level, msg, the attrs, the request_id key and the
	// id's prefix (nil without a prefix).
	reqHead []byte

	// shards hold the queued records, a request's in its connection's shard (fasthttp's
	// ConnID), each under a lock of its own: one queue and lock for all was a lock word, a
	// length and records that both cores wrote in turn on every request (bench/README.md,
	// issue 32's tenth pass). The writer takes them all and writes their records in the order
	// of their times (each shard's are in the order they were added).
	shards [accessShards]accessShard
	wake   chan struct{}
	full   chan struct{} // batch records are queued
	batch  int           // accessBatch, or accessFileBatch for a regular file
	// shardBatch is batch over the shards: a shard holding that many records counts what all
	// of them hold, and wakes the writer without waiting for the delay once that is batch.
	shardBatch int
	done       chan struct{}
	// The writer goroutine's: its buffer, and the second formatted last (appendRFC3339).
	buf     []byte
	sec     int64
	loc     *time.Location
	secText []byte
	zone    []byte
}

// newAccessLog starts the access log of a server whose request ids start with reqPfx.
func newAccessLog(cfg AccessLogConfig, reqPfx string) *accessLog {
	l := &accessLog{cfg: cfg, reqPfx: reqPfx, wake: make(chan struct{}, 1), full: make(chan struct{}, 1), done: make(chan struct{}), batch: accessBatch}
	if regularFile(cfg.Output) {
		l.batch = accessFileBatch
	}
	l.shardBatch = l.batch / accessShards // a multiple of accessCountEvery
	for _, a := range cfg.Attrs {
		l.prefix = l.appendAttr(l.prefix, a[0], a[1])
	}
	if reqPfx != "" {
		// The server's own id: hex, '-' and base 36, which neither format quotes or escapes.
		h := append(l.appendMsg(nil, "request"), l.prefix...)
		h = l.appendKey(h, "request_id")
		if !cfg.Text {
			h = append(h, '"')
		}
		l.reqHead = append(append(h, reqPfx...), '-')
	}
	go l.run()
	return l
}

// accessShards is how many queues the records are kept in (accessLog.shards).
const accessShards = 4

// accessShard is one queue of records, on cache lines of its own.
type accessShard struct {
	mu      sync.Mutex
	queue   []accessRecord
	spare   []accessRecord
	n       atomic.Int64 // len(queue) as of its last multiple of accessCountEvery (queued)
	dropped int
	closed  bool
	_       [128 - 8 - 24 - 24 - 8 - 8 - 8]byte
}

// accessCountEvery: a shard publishes its length to the others' adders every this many
// records (an atomic store per record was a tenth of the log's cost on one connection).
const accessCountEvery = 16

// queued is about how many records the shards hold: each as of its last multiple of
// accessCountEvery, under the truth by less than that per shard.
func (l *accessLog) queued() (n int64) {
	for i := range l.shards {
		n += l.shards[i].n.Load()
	}
	return n
}

// add queues one request's record (the request path: no formatting, no write), in the shard of
// the connection it came on (conn: fasthttp's ConnID).
func (l *accessLog) add(conn uint64, r accessRecord) {
	sh := &l.shards[conn%accessShards]
	sh.mu.Lock()
	if sh.closed || len(sh.queue) >= accessMaxQueued/accessShards {
		sh.dropped++
		sh.mu.Unlock()
		return
	}
	sh.queue = append(sh.queue, r)
	n := len(sh.queue)
	switch {
	case n == 1:
		// Under the lock: close marks every shard closed under its lock before it closes
		// wake, so wake is open here (a send after the unlock could meet a closed channel at
		// shutdown). A record added to an empty shard leaves a wake pending, or the writer
		// has yet to take the shards: none waits past the delay.
		select {
		case l.wake <- struct{}{}:
		default:
		}
	case n%accessCountEvery == 0:
		sh.n.Store(int64(n))
		// A batch in all: the shards' lengths are read only once this one holds its share
		// (a few connections fill one shard, many fill all four about evenly).
		if n >= l.shardBatch && l.queued() >= int64(l.batch) {
			select { // full is never closed; once signalled, a send is a check of its buffer
			case l.full <- struct{}{}:
			default:
			}
		}
	}
	sh.mu.Unlock()
}

// regularFile tells whether w writes to a regular file (through a LockedWriter or not).
func regularFile(w io.Writer) bool {
	if lw, ok := w.(*LockedWriter); ok {
		w = lw.W
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

func (l *accessLog) run() {
	defer close(l.done)
	delay := time.NewTimer(accessFlushDelay)
	delay.Stop()
	for {
		_, ok := <-l.wake
		if ok {
			// Gather the lines of the next few milliseconds, or a batch's worth. A full signal
			// left from a batch already written only ends this wait early.
			delay.Reset(accessFlushDelay)
			select {
			case <-delay.C:
			case <-l.full:
				delay.Stop()
			}
		}
		l.flush()
		if !ok {
			return
		}
	}
}

// flush writes what is queued in one Write: the shards' records merged by their times.
func (l *accessLog) flush() {
	var batches [accessShards][]accessRecord
	dropped := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		batches[i], dropped = sh.queue, dropped+sh.dropped
		sh.queue, sh.spare, sh.dropped = sh.spare[:0], nil, 0
		sh.n.Store(0)
		sh.mu.Unlock()
	}
	b := l.buf[:0]
	var next [accessShards]int
	for {
		first := -1
		for i := range batches {
			if next[i] < len(batches[i]) && (first < 0 || batches[i][next[i]].at.Before(batches[first][next[first]].at)) {
				first = i
			}
		}
		if first < 0 {
			break
		}
		b = l.appendLine(b, &batches[first][next[first]])
		next[first]++
		if len(b) >= accessWriteChunk {
			// A large batch goes out in chunks: the buffer stays one size, never regrown.
			_, _ = l.cfg.Output.Write(b) // nowhere to report a failed log write
			b = b[:0]
		}
	}
	if dropped > 0 {
		b = l.appendNotice(b, dropped)
	}
	if len(b) > 0 {
		_, _ = l.cfg.Output.Write(b)
	}
	for i := range l.shards {
		clear(batches[i])
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.spare = batches[i][:0]
		sh.mu.Unlock()
	}
	if cap(b) <= 1<<20 {
		l.buf = b
	}
}

// close writes what is queued and stops the goroutine; later records are dropped.
func (l *accessLog) close() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		if sh.closed {
			sh.mu.Unlock()
			<-l.done
			return
		}
		sh.closed = true
		sh.mu.Unlock()
	}
	close(l.wake)
	<-l.done
}

// appendLine formats one record as slog's handler would.
func (l *accessLog) appendLine(b []byte, r *accessRecord) []byte {
	if r.id == "" && l.reqHead != nil {
		b = appendBase36(append(l.appendTime(b, r.at), l.reqHead...), r.seq)
		if !l.cfg.Text {
			b = append(b, '"')
		}
	} else {
		b = l.appendHead(b, r.at, "request")
		b = append(b, l.prefix...)
		b = l.appendAttr(b, "request_id", r.id)
	}
	if l.cfg.Text {
		b = append(b, r.route.text...)
	} else {
		b = append(b, r.route.json...)
	}
	b = l.appendKey(b, "status")
	if st := r.status; st >= 100 && st <= 999 { // every HTTP status: three digits, as AppendInt's
		b = append(b, byte('0'+st/100), byte('0'+st/10%10), byte('0'+st%10))
	} else {
		b = strconv.AppendInt(b, int64(st), 10)
	}
	b = l.appendKey(b, "duration_ms")
	b = appendMillis(b, r.duration.Microseconds())
	b = l.appendKey(b, "remote")
	if r.remoteText != "" {
		// A dotted quad or an IPv6 address (the same bytes as below): hex digits, '.' and ':',
		// which neither format quotes or escapes, written as they are once that is checked.
		switch {
		case !ipText(r.remoteText):
			if l.cfg.Text {
				b = appendTextValue(b, r.remoteText)
			} else {
				b = jsonenc.AppendString(b, r.remoteText)
			}
		case l.cfg.Text:
			b = append(b, r.remoteText...)
		default:
			b = append(append(append(b, '"'), r.remoteText...), '"')
		}
	} else if ip4 := r.remote.To4(); ip4 != nil {
		// Dotted quad, never quoted in text; without net.IP.String's allocation.
		if !l.cfg.Text {
			b = append(b, '"')
		}
		for i, o := range ip4 {
			if i > 0 {
				b = append(b, '.')
			}
			b = strconv.AppendUint(b, uint64(o), 10)
		}
		if !l.cfg.Text {
			b = append(b, '"')
		}
	} else if l.cfg.Text {
		b = appendTextValue(b, r.remote.String())
	} else {
		b = jsonenc.AppendString(b, r.remote.String())
	}
	if l.cfg.Text {
		return append(b, '\n')
	}
	return append(b, "}\n"...)
}

// appendNotice is the line that says records were dropped.
func (l *accessLog) appendNotice(b []byte, n int) []byte {
	b = l.appendHead(b, time.Now(), "access log lines dropped: the log output did not keep up")
	b = append(b, l.prefix...)
	b = l.appendKey(b, "dropped")
	b = strconv.AppendInt(b, int64(n), 10)
	if l.cfg.Text {
		return append(b, '\n')
	}
	return append(b, "}\n"...)
}

func (l *accessLog) appendHead(b []byte, at time.Time, msg string) []byte {
	return l.appendMsg(l.appendTime(b, at), msg)
}

// appendTime begins a line: its time as slog writes it (text: milliseconds).
func (l *accessLog) appendTime(b []byte, at time.Time) []byte {
	if l.cfg.Text {
		return l.appendRFC3339(append(b, "time="...), at.Truncate(time.Millisecond), 3)
	}
	return l.appendRFC3339(append(b, `{"time":"`...), at, -1)
}

// appendMsg follows appendTime: the level and msg.
func (l *accessLog) appendMsg(b []byte, msg string) []byte {
	if l.cfg.Text {
		return appendTextValue(append(b, " level=INFO msg="...), msg)
	}
	return jsonenc.AppendString(append(b, `","level":"INFO","msg":`...), msg)
}

// appendRFC3339 writes at as RFC 3339 with digits fraction digits (-1: nanoseconds without
// trailing zeros, as time.RFC3339Nano). The date, hour, minute and second are formatted once
// per second; most lines only add their fraction.
func (l *accessLog) appendRFC3339(b []byte, at time.Time, digits int) []byte {
	sec := at.Unix()
	if sec != l.sec || at.Location() != l.loc {
		l.sec, l.loc = sec, at.Location()
		l.secText = at.Truncate(time.Second).AppendFormat(l.secText[:0], "2006-01-02T15:04:05")
		l.zone = at.AppendFormat(l.zone[:0], "Z07:00")
	}
	b = append(b, l.secText...)
	ns := at.Nanosecond()
	var frac [10]byte
	frac[0] = '.'
	v := uint32(ns) // under 10^9: nine digits, two at a time, then the first
	for i := 9; i > 1; i -= 2 {
		d := v % 100 * 2
		v /= 100
		frac[i-1], frac[i] = digitPairs[d], digitPairs[d+1]
	}
	frac[1] = byte('0' + v)
	n := 10
	if digits >= 0 {
		n = 1 + digits
	} else {
		for n > 1 && frac[n-1] == '0' {
			n--
		}
		if n == 1 {
			n = 0 // a whole second: no fraction at all
		}
	}
	b = append(b, frac[:n]...)
	return append(b, l.zone...)
}

// digitPairs holds 00 to 99, two bytes each.
const digitPairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" + "30313233343536373839" +
	"40414243444546474849" + "50515253545556575859" + "60616263646566676869" + "70717273747576777879" +
	"80818283848586878889" + "90919293949596979899"

func (l *accessLog) appendKey(b []byte, k string) []byte {
	if l.cfg.Text {
		return append(append(append(b, ' '), k...), '=')
	}
	return append(append(append(b, `,"`...), k...), `":`...)
}

func (l *accessLog) appendAttr(b []byte, k, v string) []byte {
	b = l.appendKey(b, k)
	if l.cfg.Text {
		return appendTextValue(b, v)
	}
	return jsonenc.AppendString(b, v)
}

// ipText tells whether s holds only what an IP address's text does (hex digits, '.' and ':'),
// which slog's JSON handler writes unescaped and its text handler unquoted.
func ipText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > ':') && c != '.' && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}

// appendTextValue appends s as slog's text handler does: bare when it needs no quoting.
func appendTextValue(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '=' || c == '"' || c >= utf8.RuneSelf {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(b, s...)
}

// appendMillis appends us/1000 as strconv.AppendFloat(b, float64(us)/1000, 'g', -1, 64)
// does (slog's number), by hand below 10^9 µs: the quotient is the double nearest the decimal
// with three places, whose shortest form is that decimal without its trailing zeros, and 'g'
// writes it without an exponent below 10^6 (ms). TestAppendMillis checks it against AppendFloat.
func appendMillis(b []byte, us int64) []byte {
	if us < 0 || us >= 1e9 {
		return strconv.AppendFloat(b, float64(us)/1000, 'g', -1, 64)
	}
	if us < 1000 { // under a millisecond, most lines: no integer to format
		b = append(b, '0')
	} else {
		b = strconv.AppendInt(b, us/1000, 10)
	}
	frac := us % 1000
	if frac == 0 {
		return b
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	return append(append(b, '.'), digits[:n]...)
}
