package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsPermissions is the NATS user block README's "Cluster" section gives (between its
// nats-permissions markers): what a node needs of NATS, and no more.
func natsPermissions(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "<!-- nats-permissions:begin -->")
	block, _, ok2 := strings.Cut(block, "<!-- nats-permissions:end -->")
	_, block, ok3 := strings.Cut(block, "```conf\n")
	block, _, ok4 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 || !ok4 {
		t.Fatal("README.md has no nats-permissions block with a conf code block")
	}
	return block
}

// violations collects the permission violations a NATS server logs.
type violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *violations) add(format string, args []any) {
	if line := fmt.Sprintf(format, args...); strings.Contains(strings.ToLower(line), "violation") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}

func (v *violations) Noticef(format string, args ...any) { v.add(format, args) }
func (v *violations) Warnf(format string, args ...any)   { v.add(format, args) }
func (v *violations) Fatalf(format string, args ...any)  { v.add(format, args) }
func (v *violations) Errorf(format string, args ...any)  { v.add(format, args) }
func (v *violations) Debugf(format string, args ...any)  { v.add(format, args) }
func (v *violations) Tracef(format string, args ...any)  { v.add(format, args) }

// Two nodes on a NATS server whose only user has README's permissions, no more: every part
// of a node works (buckets, records stream, fences, directory watch, forwarding, a media body
// in the object store, live events, a graceful hand-over) and the server logs no permission
// violation.
func TestNATSPermissionsREADME(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GATEWAY_NATS_PASSWORD", "s3cret-for-the-test")
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:-1\njetstream { store_dir: %q }\n%s", filepath.Join(dir, "js"), natsPermissions(t))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("README's permissions block: %v", err)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	var v violations
	srv.SetLogger(&v, true, false)
	t.Cleanup(func() {
		if t.Failed() {
			v.mu.Lock()
			defer v.mu.Unlock()
			t.Logf("the server's permission violations: %s", strings.Join(v.lines[:min(10, len(v.lines))], "\n"))
		}
	})
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://gateway:s3cret-for-the-test@", 1)
	simNet, simURL := startSim(t)
	cfg := func(id string) Config {
		c := clusterConfig(t, id, url, simURL)
		c.NATSPrefix = "gateway" // the README's
		return c
	}
	a := startFirst(t, cfg("a"))
	b := startSecond(t, a, cfg("b"))
	p := owned(b)[0]
	uid := userOn(p, "perm")
	admin := a.token(t, "root", "admin")
	tok := a.signIn(t, uid)
	a.link(t, simNet, tok, "447700900601")
	key, _ := a.newKey(t, admin, uid, "k")
	// A live stream on a, the user's events published by b.
	req, _ := http.NewRequest("GET", a.url+"/api/client/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
	}()
	eventually(t, 5*time.Second, "b knows a streams the user", func() bool { return b.cluster.live.Listening(uid) })
	// Through a (forwarded to b): a text, and 600 KiB of image (its body in the object store).
	id := a.must(t, 200, "POST", "/api/v1/messages/send", key, map[string]any{"phone": "15550100601", "message": "hello"}).str("message_id")
	img := append(jpegFixture(t), make([]byte, 600<<10)...)
	a.must(t, 200, "POST", "/api/v1/messages/send-image", key, map[string]any{"to": "15550100602", "image": "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(img)})
	eventually(t, 10*time.Second, "both delivered", func() bool {
		return len(simNet.Messages("15550100601")) == 1 && len(simNet.Messages("15550100602")) == 1
	})
	if got := simNet.Messages("15550100602")[0].Bytes; got != len(img) {
		t.Fatalf("the image arrived with %d bytes, want %d", got, len(img))
	}
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case l := <-events:
			seen = strings.Contains(l, id)
		case <-deadline:
			t.Fatal("no live event of the message on a")
		}
	}
	// b leaves: a takes its partitions gracefully.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	b.Shutdown(sctx)
	scancel()
	if len(owned(a)) != testPartitions {
		t.Fatalf("a runs %v after b left", owned(a))
	}
	a.must(t, 200, "GET", "/api/v1/account", key, nil)
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.lines) > 0 {
		t.Fatalf("README's permissions are not enough: the server logged %d violations, the first: %s", len(v.lines), strings.Join(v.lines[:min(5, len(v.lines))], "\n"))
	}
}

// jpegFixture is a small JPEG image.
func jpegFixture(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
