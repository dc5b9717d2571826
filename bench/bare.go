package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The bare server is the ceiling each case is measured against: fasthttp with the gateway's
// server settings, answering each path with the status, headers and body bytes the gateway
// gave for that case (a captured real response), and doing nothing else. It runs as its own
// process, like the gateway, so both get the same share of the machine.

// bareResponse is one canned answer, set through POST /__bare/response.
type bareResponse struct {
	Path    string      `json:"path"`
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
	Body    string      `json:"body"`
}

const bareControlPath = "/__bare/response"

// bareServer answers from an immutable path → response map, replaced whole on each change.
type bareServer struct {
	mu     sync.Mutex // serialises replacements
	routes atomic.Pointer[map[string]*bareAnswer]
}

type bareAnswer struct {
	status  int
	headers [][2]string
	body    []byte
}

func newBareServer() *bareServer {
	b := &bareServer{}
	b.routes.Store(&map[string]*bareAnswer{})
	return b
}

func (b *bareServer) set(r bareResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.routes.Load()
	next := make(map[string]*bareAnswer, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[r.Path] = &bareAnswer{status: r.Status, headers: r.Headers, body: []byte(r.Body)}
	b.routes.Store(&next)
}

func (b *bareServer) handle(ctx *fasthttp.RequestCtx) {
	if a := (*b.routes.Load())[string(ctx.Path())]; a != nil {
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
		b.set(r)
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
// (the harness holds it open, so the server never outlives the harness).
func bareMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := newBareServer().server()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Shutdown()
	}()
	return srv.Serve(ln)
}

// bareProc is the bare server process started by the harness.
type bareProc struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	api   *apiClient
}

// startBare re-executes this binary as the bare server (roleEnv makes that work for the test
// binary too) and reads its address.
func startBare() (*bareProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "--addr", "127.0.0.1:0")
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

func (b *bareProc) stop() {
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
}
