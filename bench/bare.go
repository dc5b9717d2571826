package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
)

// The bare server is the ceiling each case is measured against: fasthttp with the gateway's
// server settings, answering each path with the status, headers and body bytes the gateway
// gave for that case (a captured real response), and doing nothing else. It runs as its own
// process, like the gateway, so both get the same share of the machine.
//
// A path may also be flagged to commit: before answering, the bare server then makes one
// durable commit per request (the request body under a new key) to plain Badger, as anyone
// would write it (DESIGN.md section 8): its default options, one transaction per request, the
// concurrent transactions batched by Badger itself, synced per commit with "batch" and not at
// all with "interval". That is about the least a server must do to accept a request durably:
// the floor of the cases that write. The gateway's own group commit may beat it.

// bareResponse is one canned answer, set through POST /__bare/response.
type bareResponse struct {
	Path    string      `json:"path"`
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
	Body    string      `json:"body"`
	// Commit, "batch" or "interval", makes each request on Path wait for one plain Badger
	// commit with that fsync mode before the answer; "nats" for one commit to the records
	// stream on the bare server's --nats (the gateway's own natskv store); "" answers at once.
	Commit string `json:"commit,omitempty"`
}

const (
	bareControlPath = "/__bare/response"
	// bareCommitsPath answers GET with {"commits": n}: floor commits made so far.
	bareCommitsPath = "/__bare/commits"
	// bareProfilePath answers GET ?seconds=N with the bare process's CPU profile over the next
	// N seconds (runtime/pprof's, as the gateway's --pprof gives its own), taken in a window
	// of bare's own beside the gateway's profile window (harness.go, bareProfile).
	bareProfilePath = "/__bare/profile"
	// bareProfileMax bounds a profile's seconds.
	bareProfileMax = 600
	// floorKeyPrefix starts every key the floor writes (then a big-endian counter).
	floorKeyPrefix = "floor/"
)

// bareServer answers from an immutable path → response map, replaced whole on each change.
type bareServer struct {
	mu     sync.Mutex // serialises replacements and guards stores, tmp, closed
	routes atomic.Pointer[map[string]*bareAnswer]

	// parent is where the floor's temporary directory is made ("" = the system's temp dir);
	// tmp is that directory, made on the first Commit route and removed by close. Each fsync
	// mode has its own store, tmp/<mode>, opened once.
	parent  string
	tmp     string
	nats    string // the NATS URL of the "nats" floor
	stores  map[string]floorStore
	closed  bool
	seq     atomic.Uint64 // the floor's keys
	commits atomic.Int64  // floor commits that succeeded
}

type bareAnswer struct {
	status  int
	headers [][2]string
	body    []byte
	store   floorStore // nil: no commit before the answer
}

// floorStore makes the floor's one commit per request.
type floorStore interface {
	put(key, value []byte) error
	close() error
}

// plainBadger is Badger as its documentation has one write: Update, one key per transaction.
type plainBadger struct{ db *badger.DB }

func (p plainBadger) put(key, value []byte) error {
	return p.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) })
}

func (p plainBadger) close() error { return p.db.Close() }

// kvStore is one of the gateway's stores (natskv) committing one op.
type kvStore struct{ kv persist.KV }

func (k kvStore) put(key, value []byte) error {
	return k.kv.Commit(context.Background(), persist.Op{Key: key, Value: value})
}

func (k kvStore) close() error { return k.kv.Close() }

func newBareServer(parent, nats string) *bareServer {
	b := &bareServer{parent: parent, nats: nats, stores: map[string]floorStore{}}
	b.routes.Store(&map[string]*bareAnswer{})
	return b
}

func (b *bareServer) set(r bareResponse) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := &bareAnswer{status: r.Status, headers: r.Headers, body: []byte(r.Body)}
	if r.Commit != "" {
		var err error
		if a.store, err = b.store(r.Commit); err != nil {
			return err
		}
	}
	old := *b.routes.Load()
	next := make(map[string]*bareAnswer, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[r.Path] = a
	b.routes.Store(&next)
	return nil
}

// store returns the floor's store of an fsync mode, opening it on first use (b.mu held):
// Badger with its default options but the sync mode (and no logging).
func (b *bareServer) store(mode string) (floorStore, error) {
	if s := b.stores[mode]; s != nil {
		return s, nil
	}
	switch {
	case b.closed:
		return nil, persist.ErrClosed
	case mode == "nats" && b.nats != "":
		s, err := natskv.Open(context.Background(), natskv.Options{URL: b.nats, Prefix: "benchfloor"})
		if err != nil {
			return nil, err
		}
		b.stores[mode] = kvStore{s}
		return b.stores[mode], nil
	case mode != string(persist.FsyncBatch) && mode != string(persist.FsyncInterval):
		return nil, fmt.Errorf("commit %q: want %q or %q", mode, persist.FsyncBatch, persist.FsyncInterval)
	}
	if b.tmp == "" {
		dir, err := os.MkdirTemp(b.parent, "bare-floor-")
		if err != nil {
			return nil, err
		}
		b.tmp = dir
	}
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(b.tmp, mode)).
		WithSyncWrites(mode == string(persist.FsyncBatch)).WithLogger(nil))
	if err != nil {
		return nil, err
	}
	b.stores[mode] = plainBadger{db}
	return b.stores[mode], nil
}

// close closes the floor's stores and removes their directory.
func (b *bareServer) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	var errs []error
	for mode, s := range b.stores {
		errs = append(errs, s.close())
		delete(b.stores, mode)
	}
	if b.tmp != "" {
		errs = append(errs, os.RemoveAll(b.tmp))
		b.tmp = ""
	}
	return errors.Join(errs...)
}

// commit makes the floor's one durable write of a request: its body under a new key.
func (b *bareServer) commit(ctx *fasthttp.RequestCtx, s floorStore) error {
	key := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(floorKeyPrefix)+8), floorKeyPrefix...), b.seq.Add(1))
	if err := s.put(key, ctx.PostBody()); err != nil {
		return err
	}
	b.commits.Add(1)
	return nil
}

func (b *bareServer) handle(ctx *fasthttp.RequestCtx) {
	if a := (*b.routes.Load())[string(ctx.Path())]; a != nil {
		if a.store != nil {
			if err := b.commit(ctx, a.store); err != nil {
				ctx.Error("bare commit: "+err.Error(), fasthttp.StatusInternalServerError)
				return
			}
		}
		ctx.SetStatusCode(a.status)
		for _, h := range a.headers {
			ctx.Response.Header.Set(h[0], h[1])
		}
		ctx.Response.SetBodyRaw(a.body)
		return
	}
	if string(ctx.Path()) == bareControlPath && ctx.IsPost() {
		var r bareResponse
		if err := json.Unmarshal(ctx.PostBody(), &r); err != nil || r.Path == "" || r.Status < 100 {
			ctx.Error("bad bare response", fasthttp.StatusBadRequest)
			return
		}
		if err := b.set(r); err != nil {
			ctx.Error("bare response: "+err.Error(), fasthttp.StatusBadRequest)
		}
		return
	}
	if string(ctx.Path()) == bareProfilePath && ctx.IsGet() {
		secs := ctx.QueryArgs().GetUintOrZero("seconds")
		if secs <= 0 || secs > bareProfileMax {
			ctx.Error(fmt.Sprintf("bare profile: seconds must be 1 to %d", bareProfileMax), fasthttp.StatusBadRequest)
			return
		}
		var buf bytes.Buffer
		if err := pprof.StartCPUProfile(&buf); err != nil {
			ctx.Error("bare profile: "+err.Error(), fasthttp.StatusConflict) // one at a time
			return
		}
		time.Sleep(time.Duration(secs) * time.Second)
		pprof.StopCPUProfile()
		ctx.SetBody(buf.Bytes())
		return
	}
	if string(ctx.Path()) == bareCommitsPath && ctx.IsGet() {
		ctx.SetBody(mustJSON(map[string]int64{"commits": b.commits.Load()}))
		return
	}
	ctx.Error(`{"success":false,"error":"no such route","code":"not_found"}`, fasthttp.StatusNotFound)
}

// server mirrors the gateway's fasthttp.Server settings (httpapi/server.go).
func (b *bareServer) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: b.handle, Name: "gateway", ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Hour,
		IdleTimeout: 2 * time.Minute, NoDefaultServerHeader: true, NoDefaultContentType: true,
		MaxRequestBodySize: 1 << 20,
	}
}

// bareMain is `bench bare`: serve on --addr, print "listening ADDR", stop when stdin closes
// (the harness holds it open, so the server never outlives the harness) or on SIGINT or
// SIGTERM, then remove the floor's directory.
func bareMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	tmp := fs.String("tmp", "", "where the floor's temporary store directory is made (default: the system's temp dir); put it on the gateway's file system")
	nats := fs.String("nats", "", "NATS URL of the JetStream floor (commit mode \"nats\")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	b := newBareServer(*tmp, *nats)
	srv := b.server()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-stdin:
		case <-sig:
		}
		_ = srv.Shutdown()
	}()
	err = srv.Serve(ln)
	return errors.Join(err, b.close())
}

// bareProc is the bare server process started by the harness.
type bareProc struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	api   *apiClient

	stopOnce sync.Once
}

// startBare re-executes this binary as the bare server (roleEnv makes that work for the test
// binary too) and reads its address. tmp is where its floor stores go ("" = the system's temp
// dir): the harness passes its work dir, so the floor writes to the gateway's file system.
func startBare(tmp, nats string) (*bareProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "--addr", "127.0.0.1:0", "--tmp", tmp, "--nats", nats)
	cmd.Env = append(os.Environ(), roleEnv+"=bare")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("bare server did not start: %q %v", line, err)
	}
	return &bareProc{addr: addr, cmd: cmd, stdin: stdin, api: newAPIClient(addr)}, nil
}

// set makes the bare server answer r.Path with r.
func (b *bareProc) set(r bareResponse) error {
	st, body, err := b.api.do("POST", bareControlPath, nil, mustJSON(r))
	return want2xx("bare "+bareControlPath, st, body, err)
}

// profile fetches the bare process's CPU profile over the next d (whole seconds, at least one).
func (b *bareProc) profile(d time.Duration) ([]byte, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	c := &http.Client{Timeout: d + 30*time.Second}
	res, err := c.Get("http://" + b.addr + bareProfilePath + "?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("bare %s answered %d: %.200s", bareProfilePath, res.StatusCode, body)
	}
	return body, err
}

// commits is how many floor commits the bare server has made so far.
func (b *bareProc) commits() (int64, error) {
	st, body, err := b.api.do("GET", bareCommitsPath, nil, nil)
	if err := want2xx("bare "+bareCommitsPath, st, body, err); err != nil {
		return 0, err
	}
	var c struct {
		Commits int64 `json:"commits"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return 0, fmt.Errorf("bare %s: %w", bareCommitsPath, err)
	}
	return c.Commits, nil
}

// stop closes the server's stdin and waits for it to exit (it closes and removes its floor
// stores first); safe to call twice.
func (b *bareProc) stop() {
	b.stopOnce.Do(func() {
		b.api.close()
		_ = b.stdin.Close()
		done := make(chan struct{})
		go func() { _ = b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-done
		}
	})
}

// bareProfileWindow profiles bare under the profile window's load (pl: the bench's generator,
// the gateway's profile window's), in a window of bare's own that no ratio uses, and writes the
// profile beside the gateway's (<stamp>-<phase>-<case>-bare-cpu.prof): the two profiles, taken
// under the same load, say what a request costs the gateway beyond what fasthttp and the kernel
// cost bare under that load, where a profile in process (httpapi's served benchmarks) has no
// kernel and no other process. Its load is the result's BareProfileWindow, its errors counted
// as any window's. It returns a note for the result when the profile could not be taken (""
// when it was).
func (h *harness) bareProfileWindow(ctx context.Context, cr *caseRun, pl load, phase string) string {
	captured := cr.captured
	captured.Commit = "" // bare's own answer, as in its windows: no floor commit
	if err := h.bare.set(captured); err != nil {
		return "bare not profiled: " + err.Error()
	}
	if err := h.settle(ctx, cr.g, cr.r); err != nil {
		return "bare not profiled: " + err.Error()
	}
	pl.addr, pl.pid = h.bare.addr, h.bare.cmd.Process.Pid
	type fetched struct {
		raw []byte
		err error
	}
	got := make(chan fetched, 1)
	pl.onWindow = func(start bool) {
		if start {
			go func() {
				raw, err := h.bare.profile(pl.duration)
				got <- fetched{raw, err}
			}()
		}
	}
	s := measure(ctx, pl, cr.tgt)
	cr.r.BareProfileWindow = &s
	cr.errs += s.Errors
	if s.Requests == 0 {
		return "bare not profiled: no requests answered in its window"
	}
	var f fetched
	select {
	case f = <-got:
	case <-ctx.Done():
		return "bare not profiled: " + ctx.Err().Error()
	}
	if f.err != nil {
		return "bare not profiled: " + f.err.Error()
	}
	path := h.profilePath(phase, cr.c.id+"-bare")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "bare not profiled: " + err.Error()
	}
	if err := os.WriteFile(path, f.raw, 0o644); err != nil {
		return "bare not profiled: " + err.Error()
	}
	return ""
}
