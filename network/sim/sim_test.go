package sim

import (
	"context"
	"errors"
	"hash/maphash"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// recorder is a sink that keeps every event; next hands them out in order.
type recorder struct {
	mu     sync.Mutex
	events []network.Event
	read   int
}

func (r *recorder) sink(ev network.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// next waits for the next event.
func (r *recorder) next(t *testing.T) network.Event {
	t.Helper()
	var ev network.Event
	waitFor(t, "next event", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.read < len(r.events) {
			ev = r.events[r.read]
			r.read++
			return true
		}
		return false
	})
	return ev
}

// expect waits for the next event and checks it equals want.
func (r *recorder) expect(t *testing.T, want network.Event) {
	t.Helper()
	if got := r.next(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("event = %#v, want %#v", got, want)
	}
}

// qr waits for the next event and checks it is a QR code.
func (r *recorder) qr(t *testing.T) string {
	t.Helper()
	ev := r.next(t)
	q, ok := ev.(network.QRCode)
	if !ok || q.Code == "" {
		t.Fatalf("event = %#v, want a QR code", ev)
	}
	return q.Code
}

func (r *recorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events) - r.read
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// poll polls cond until it holds (true) or a deadline passes (false).
func poll(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func openSim(t testing.TB, o Options) *Network {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	n, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// paired opens a session and pairs it with phone by a QR scan.
func paired(t *testing.T, n *Network, session, phone string) (network.Client, *recorder) {
	t.Helper()
	r := &recorder{}
	c, err := n.Open(session, r.sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.qr(t)
	if err := n.Scan(session, phone); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Paired{Phone: phone})
	r.expect(t, network.Connected{Phone: phone})
	return c, r
}

func text(id, to, body string) domain.Message {
	return domain.Message{ID: id, To: to, Kind: domain.KindText, Text: body}
}

var ctx = context.Background()

func TestPairByQRScan(t *testing.T) {
	n := openSim(t, Options{})
	r := &recorder{}
	c, err := n.Open("s1", r.sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Paired(); ok {
		t.Fatal("new session reports paired")
	}
	if err := n.Scan("s1", "15550000001"); !errors.Is(err, ErrNotScanning) {
		t.Fatalf("scan before connect: %v, want ErrNotScanning", err)
	}
	if err := n.Scan("nobody", "15550000001"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("scan of unknown session: %v, want ErrUnknownSession", err)
	}

	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	code := r.qr(t)
	if err := c.Connect(ctx); err != nil { // already showing: the same code again
		t.Fatal(err)
	}
	r.expect(t, network.QRCode{Code: code})
	if err := n.Scan("s1", "12"); !errors.Is(err, ErrBadPhone) {
		t.Fatalf("scan with bad phone: %v, want ErrBadPhone", err)
	}

	if err := n.Scan("s1", "+1 555-000-0001"); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Paired{Phone: "15550000001"})
	r.expect(t, network.Connected{Phone: "15550000001"})
	if phone, ok := c.Paired(); !ok || phone != "15550000001" {
		t.Fatalf("Paired() = %q, %v", phone, ok)
	}
	if err := n.Scan("s1", "15550000001"); !errors.Is(err, ErrNotScanning) {
		t.Fatalf("scan of a connected session: %v, want ErrNotScanning", err)
	}
	if _, err := c.PairPhone(ctx, "15550000001"); !errors.Is(err, network.ErrAlreadyPaired) {
		t.Fatalf("PairPhone when paired: %v, want ErrAlreadyPaired", err)
	}
}

func TestQRCodesRotate(t *testing.T) {
	n := openSim(t, Options{qrRotate: 5 * time.Millisecond})
	r := &recorder{}
	c, _ := n.Open("s1", r.sink)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		seen[r.qr(t)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("rotation repeated a code: %v", seen)
	}
	c.Disconnect() // stops the rotation
	waitFor(t, "rotation to stop", func() bool {
		before := r.pending()
		time.Sleep(20 * time.Millisecond)
		return r.pending() == before
	})
}

func TestPairByCode(t *testing.T) {
	n := openSim(t, Options{})
	r := &recorder{}
	c, _ := n.Open("s1", r.sink)
	if err := n.Pair("s1", "AAAAAAAA"); !errors.Is(err, ErrBadCode) {
		t.Fatalf("pair with no code asked: %v, want ErrBadCode", err)
	}
	if _, err := c.PairPhone(ctx, "123"); !errors.Is(err, ErrBadPhone) {
		t.Fatalf("PairPhone(123): %v, want ErrBadPhone", err)
	}
	code, err := c.PairPhone(ctx, "15550000002")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[A-Z0-9]{8}$`).MatchString(code) {
		t.Fatalf("pair code %q is not 8 uppercase letters or digits", code)
	}
	wrong := []byte(code)
	wrong[0] = map[bool]byte{true: 'B', false: 'A'}[wrong[0] == 'A']
	if err := n.Pair("s1", string(wrong)); !errors.Is(err, ErrBadCode) {
		t.Fatalf("wrong code: %v, want ErrBadCode", err)
	}
	if err := n.Pair("nobody", code); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v, want ErrUnknownSession", err)
	}
	if _, ok := c.Paired(); ok {
		t.Fatal("paired after a wrong code")
	}
	typed := code[:4] + "-" + code[4:] // as the phone shows it, in lower case
	if err := n.Pair("s1", strings.ToLower(typed)); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Paired{Phone: "15550000002"})
	r.expect(t, network.Connected{Phone: "15550000002"})
	if phone, _ := c.Paired(); phone != "15550000002" {
		t.Fatalf("paired with %q", phone)
	}
	if err := n.Pair("s1", code); !errors.Is(err, ErrBadCode) {
		t.Fatalf("code used twice: %v, want ErrBadCode", err)
	}
}

func TestSendRecordsEveryKind(t *testing.T) {
	n := openSim(t, Options{})
	c, _ := paired(t, n, "s1", "15550000001")
	const to = "15551112222"
	msgs := []domain.Message{
		text("m1", to, "hello <world> & \"quotes\"\nline two"),
		{ID: "m2", To: to, Kind: domain.KindImage, Caption: "a cat", FileName: "cat.png", MimeType: "image/png", Data: make([]byte, 1234)},
		{ID: "m3", To: to, Kind: domain.KindVideo, Caption: "clip", FileName: "v.mp4", MimeType: "video/mp4", Data: make([]byte, 10)},
		{ID: "m4", To: to, Kind: domain.KindAudio, FileName: "a.ogg", MimeType: "audio/ogg", Data: make([]byte, 7)},
		{ID: "m5", To: to, Kind: domain.KindDocument, Caption: "invoice", FileName: "inv.pdf", MimeType: "application/pdf", Data: make([]byte, 99)},
		{ID: "m6", To: to, Kind: domain.KindLocation, Lat: 48.8584, Lng: 2.2945, Address: "Eiffel Tower"},
		{ID: "m7", To: to, Kind: domain.KindContact, ContactName: "Ann", ContactPhone: "15553334444"},
	}
	want := []domain.Delivered{
		{ID: "m1", Type: "text", Text: msgs[0].Text},
		{ID: "m2", Type: "image", Caption: "a cat", FileName: "cat.png", MimeType: "image/png", Bytes: 1234},
		{ID: "m3", Type: "video", Caption: "clip", FileName: "v.mp4", MimeType: "video/mp4", Bytes: 10},
		{ID: "m4", Type: "audio", FileName: "a.ogg", MimeType: "audio/ogg", Bytes: 7},
		{ID: "m5", Type: "document", Caption: "invoice", FileName: "inv.pdf", MimeType: "application/pdf", Bytes: 99},
		{ID: "m6", Type: "location", Lat: new(48.8584), Lng: new(2.2945), Address: "Eiffel Tower"},
		{ID: "m7", Type: "contact", ContactName: "Ann", ContactPhone: "15553334444"},
	}
	receipts := map[string]network.Receipt{}
	for _, m := range msgs {
		rc, err := c.Send(ctx, m)
		if err != nil {
			t.Fatalf("send %s: %v", m.ID, err)
		}
		if rc.ID != m.ID || rc.At.IsZero() {
			t.Fatalf("receipt %+v for %s", rc, m.ID)
		}
		receipts[m.ID] = rc
	}
	got := n.Messages(to)
	if len(got) != len(want) {
		t.Fatalf("%d messages delivered, want %d", len(got), len(want))
	}
	for i := range want {
		want[i].From, want[i].To = "15550000001", to
		if !got[i].Timestamp.Equal(receipts[want[i].ID].At) {
			t.Errorf("%s: timestamp %v, receipt at %v", want[i].ID, got[i].Timestamp, receipts[want[i].ID].At)
		}
		got[i].Timestamp = time.Time{}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("delivered\n %+v\nwant\n %+v", got[i], want[i])
		}
	}
	if n.DeliveredCount() != int64(len(msgs)) {
		t.Fatalf("DeliveredCount = %d", n.DeliveredCount())
	}
	if other := n.Messages("15559999999"); other == nil || len(other) != 0 {
		t.Fatalf("Messages of a number never written to = %#v, want empty", other)
	}

	// An empty id is named by the network.
	rc, err := c.Send(ctx, text("", to, "no id"))
	if err != nil || rc.ID == "" {
		t.Fatalf("send without id: %+v, %v", rc, err)
	}
}

func TestDeliveredJSONNames(t *testing.T) {
	d := domain.Delivered{ID: "i", From: "f", To: "t", Type: "x", Text: "x", Caption: "x", FileName: "x",
		MimeType: "x", Bytes: 1, Lat: new(1.0), Lng: new(1.0), Address: "x", ContactName: "x", ContactPhone: "x",
		Timestamp: time.Now()}
	b, _ := json.Marshal(d)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"address", "bytes", "caption", "contactName", "contactPhone", "fileName", "from",
		"id", "lat", "lng", "mimeType", "text", "timestamp", "to", "type"}
	if !slices.Equal(keys, want) {
		t.Fatalf("JSON names %v, want %v", keys, want)
	}
	b, _ = json.Marshal(domain.Delivered{ID: "i", From: "f", To: "t", Type: "text", Text: "hi", Timestamp: time.Now()})
	m = nil
	json.Unmarshal(b, &m)
	if len(m) != 6 {
		t.Fatalf("a text message shows fields that do not apply: %s", b)
	}
}

func TestSendErrors(t *testing.T) {
	n := openSim(t, Options{})
	r := &recorder{}
	c, _ := n.Open("s1", r.sink)
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send unpaired: %v, want ErrNotConnected", err)
	}
	if _, err := c.Lookup(ctx, []string{"15551112222"}); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("Lookup unpaired: %v, want ErrNotConnected", err)
	}

	c, _ = paired(t, n, "s2", "15550000002")
	n.SetUnregistered([]string{"+1 555 999 0000", "15559990001"})
	for _, num := range []string{"15559990000", "15559990001", "12", "1555abc0000"} {
		if _, err := c.Send(ctx, text("u"+num, num, "x")); !errors.Is(err, network.ErrNotOnNetwork) {
			t.Errorf("send to %s: %v, want ErrNotOnNetwork", num, err)
		}
		if r, err := c.Lookup(ctx, []string{num}); err != nil || r[0].OnNetwork {
			t.Errorf("Lookup(%s) = %v, %v; want not on the network", num, r, err)
		}
	}
	if r, err := c.Lookup(ctx, []string{"15551112222"}); err != nil || !r[0].OnNetwork || r[0].LID == "" {
		t.Errorf("Lookup(registered) = %v, %v; want on the network with a LID", r, err)
	}
	if _, err := c.Send(ctx, domain.Message{ID: "k", To: "15551112222", Kind: "hologram"}); !errors.Is(err, network.ErrUnsupported) {
		t.Errorf("unknown kind: %v, want ErrUnsupported", err)
	}

	c.Disconnect()
	if _, err := c.Send(ctx, text("d", "15551112222", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send after Disconnect: %v, want ErrNotConnected", err)
	}
	if n.DeliveredCount() != 0 {
		t.Fatalf("failed sends delivered %d messages", n.DeliveredCount())
	}
	if err := c.Connect(ctx); err != nil { // paired: straight back online, no QR
		t.Fatal(err)
	}
	r2 := &recorder{}
	n.Open("s2", r2.sink)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	r2.expect(t, network.Connected{Phone: "15550000002"})
	if _, err := c.Send(ctx, text("d", "15551112222", "x")); err != nil {
		t.Fatal(err)
	}
}

func TestDropReconnects(t *testing.T) {
	n := openSim(t, Options{reconnectDelay: 5 * time.Millisecond})
	c, r := paired(t, n, "s1", "15550000001")
	if err := n.Drop("nobody", false); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("drop unknown: %v, want ErrUnknownSession", err)
	}
	if err := n.Drop("s1", false); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Disconnected{Reason: "connection dropped", Reconnecting: true, StatusReason: network.ReasonNetwork})
	r.expect(t, network.Connected{Phone: "15550000001"})
	if _, err := c.Send(ctx, text("a", "15551112222", "back")); err != nil {
		t.Fatalf("send after reconnect: %v", err)
	}
	if phone, ok := c.Paired(); !ok || phone != "15550000001" {
		t.Fatal("a drop lost the pairing")
	}

	c.Disconnect()
	if err := n.Drop("s1", false); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("drop of an offline session: %v, want ErrNotConnected", err)
	}
}

func TestDropWhileReconnecting(t *testing.T) {
	n := openSim(t, Options{reconnectDelay: time.Hour})
	c, r := paired(t, n, "s1", "15550000001")
	if err := n.Drop("s1", false); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Disconnected{Reason: "connection dropped", Reconnecting: true, StatusReason: network.ReasonNetwork})
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send while reconnecting: %v, want ErrNotConnected", err)
	}
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Connected{Phone: "15550000001"})
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); err != nil {
		t.Fatal(err)
	}
}

func TestLogout(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	c, r := paired(t, n, "s1", "15550000001")
	if err := n.Drop("s1", true); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.LoggedOut{Reason: "device unlinked from the phone"})
	if _, ok := c.Paired(); ok {
		t.Fatal("still paired after logout")
	}
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send after logout: %v, want ErrNotConnected", err)
	}
	if err := n.Drop("s1", true); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("logout of an unpaired session: %v, want ErrNotConnected", err)
	}
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	r.qr(t) // must scan again

	// Client.Logout, then the pairing is gone after a reopen too.
	c2, r2 := paired(t, n, "s2", "15550000002")
	if err := c2.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	r2.expect(t, network.LoggedOut{Reason: "logged out"})
	n.Close()
	n = openSim(t, Options{Dir: dir})
	for _, s := range []string{"s1", "s2"} {
		c, _ := n.Open(s, nil)
		if _, ok := c.Paired(); ok {
			t.Fatalf("%s paired again after a reopen", s)
		}
	}
}

func TestLogoutOfUnopenedSession(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	paired(t, n, "s1", "15550000001")
	n.Close()
	n = openSim(t, Options{Dir: dir})
	if err := n.Drop("s1", true); err != nil { // paired, not opened yet in this process
		t.Fatal(err)
	}
	c, _ := n.Open("s1", nil)
	if _, ok := c.Paired(); ok {
		t.Fatal("still paired")
	}
	if err := n.Drop("s9", true); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("logout of unknown session: %v, want ErrUnknownSession", err)
	}
}

func TestAtMostOncePerID(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	c, _ := paired(t, n, "s1", "15550000001")
	first, err := c.Send(ctx, text("dup", "15551112222", "one"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, text("dup", "15551112222", "one, re-sent"))
	if err != nil || again != first {
		t.Fatalf("re-send = %+v, %v; want the first receipt %+v", again, err, first)
	}
	if n.DeliveredCount() != 1 || n.Messages("15551112222")[0].Text != "one" {
		t.Fatalf("a re-send was delivered again: %+v", n.Messages("15551112222"))
	}
	// Another session re-sending the id is still the same message to the network.
	c2, _ := paired(t, n, "s2", "15550000002")
	if r, err := c2.Send(ctx, text("dup", "15553334444", "x")); err != nil || r != first {
		t.Fatalf("re-send from another session = %+v, %v", r, err)
	}

	// Concurrent sends of one new id: one delivery, one receipt.
	var wg sync.WaitGroup
	got := make([]network.Receipt, 16)
	for i := range got {
		wg.Go(func() {
			r, err := c.Send(ctx, text("race", "15551112222", "x"))
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		})
	}
	wg.Wait()
	for _, r := range got {
		if r != got[0] {
			t.Fatalf("concurrent sends got different receipts: %+v", got)
		}
	}
	if n.DeliveredCount() != 2 || len(n.Messages("15551112222")) != 2 {
		t.Fatalf("delivered %d, want 2", n.DeliveredCount())
	}
	if len(n.Messages("15553334444")) != 0 {
		t.Fatal("re-send to another number was delivered")
	}

	n.Close()
	n = openSim(t, Options{Dir: dir})
	c, _ = n.Open("s1", nil)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Send(ctx, text("dup", "15551112222", "after restart")); err != nil || !r.At.Equal(first.At) || r.ID != first.ID {
		t.Fatalf("re-send after reopen = %+v, %v; want %+v", r, err, first)
	}
	if n.DeliveredCount() != 2 {
		t.Fatalf("delivered %d after reopen and re-send, want 2", n.DeliveredCount())
	}
}

func TestStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	c1, _ := paired(t, n, "s1", "15550000001")
	c2, _ := n.Open("s2", nil)
	code, _ := c2.PairPhone(ctx, "15550000002")
	if err := n.Pair("s2", code); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c1.Send(ctx, text("a"+strconv.Itoa(i), "15551112222", "hi "+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	n.SetUnregistered([]string{"15559990000"})
	before := n.Messages("15551112222")
	n.Close()

	n = openSim(t, Options{Dir: dir})
	if got := n.Messages("15551112222"); !reflect.DeepEqual(got, before) {
		t.Fatalf("messages after reopen:\n%+v\nwant\n%+v", got, before)
	}
	if n.DeliveredCount() != 5 {
		t.Fatalf("DeliveredCount after reopen = %d", n.DeliveredCount())
	}
	for s, phone := range map[string]string{"s1": "15550000001", "s2": "15550000002"} {
		r := &recorder{}
		c, _ := n.Open(s, r.sink)
		if p, ok := c.Paired(); !ok || p != phone {
			t.Fatalf("%s: Paired() = %q, %v after reopen", s, p, ok)
		}
		if err := c.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		r.expect(t, network.Connected{Phone: phone}) // no QR
		if _, err := c.Send(ctx, text("u"+s, "15559990000", "x")); !errors.Is(err, network.ErrNotOnNetwork) {
			t.Fatalf("unregistered number forgotten: %v", err)
		}
	}
}

func TestTornLinesTolerated(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	c, _ := paired(t, n, "s1", "15550000001")
	if _, err := c.Send(ctx, text("a", "15551112222", "before")); err != nil {
		t.Fatal(err)
	}
	n.Close()

	// A damaged line in the middle, then a write torn by a crash, in every file.
	for _, name := range []string{"deliveries.jsonl", "pairings.jsonl", "unregistered.jsonl"} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("not json\n{\"id\":\"torn\",\"to\":\"1555")
		f.Close()
	}

	n = openSim(t, Options{Dir: dir})
	c, _ = n.Open("s1", nil)
	if _, ok := c.Paired(); !ok {
		t.Fatal("pairing lost")
	}
	c.Connect(ctx)
	if _, err := c.Send(ctx, text("b", "15551112222", "after")); err != nil {
		t.Fatal(err)
	}
	n.SetUnregistered([]string{"15559990000"})
	n.Close()

	n = openSim(t, Options{Dir: dir}) // the new records were not glued to the torn ones
	got := n.Messages("15551112222")
	if len(got) != 2 || got[0].Text != "before" || got[1].Text != "after" {
		t.Fatalf("messages = %+v", got)
	}
	if n.registered("15559990000") {
		t.Fatal("unregistered number written after a torn line was lost")
	}
}

func TestLatency(t *testing.T) {
	n := openSim(t, Options{Latency: 30 * time.Millisecond})
	c, _ := paired(t, n, "s1", "15550000001")
	start := time.Now()
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("send took %v, latency is 30ms", el)
	}

	n.SetLatency(time.Hour)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Send(cctx, text("b", "15551112222", "x"))
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled send: %v, want context.Canceled", err)
	}
	if n.DeliveredCount() != 1 {
		t.Fatal("a cancelled send was delivered")
	}
	n.SetLatency(0)
	if _, err := c.Send(ctx, text("b", "15551112222", "x")); err != nil {
		t.Fatal(err)
	}
	if n.DeliveredCount() != 2 {
		t.Fatal("the retry of a cancelled send was not delivered")
	}

	// Close wakes a send waiting out the latency: not delivered.
	n.SetLatency(time.Hour)
	go func() {
		_, err := c.Send(ctx, text("c", "15551112222", "x"))
		errc <- err
	}()
	n.Close()
	if err := <-errc; !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send during Close: %v, want ErrNotConnected", err)
	}
}

func TestAutoPair(t *testing.T) {
	n := openSim(t, Options{AutoPair: 10 * time.Millisecond})
	r := &recorder{}
	c, _ := n.Open("s1", r.sink)
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	r.qr(t)
	phone := autoPhone("s1")
	if !validPhone(phone) {
		t.Fatalf("auto phone %q is not a phone number", phone)
	}
	r.expect(t, network.Paired{Phone: phone})
	r.expect(t, network.Connected{Phone: phone})
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	n := openSim(t, Options{})
	c, r := paired(t, n, "s1", "15550000001")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Send(ctx, text("a", "15551112222", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send after Close: %v", err)
	}
	if err := c.Connect(ctx); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("connect after Close: %v", err)
	}
	if _, err := n.Open("s2", nil); err == nil {
		t.Fatal("Open after Close succeeded")
	}
	if r.pending() != 0 {
		t.Fatal("events after Close")
	}
}

// Events reach a slow sink in order, and the sim does not wait for it.
func TestEventsInOrderToSlowSink(t *testing.T) {
	n := openSim(t, Options{reconnectDelay: time.Hour})
	release := make(chan struct{})
	var mu sync.Mutex
	var got []network.Event
	c, err := n.Open("s1", func(ev network.Event) {
		<-release
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Connect(ctx)
	if err := n.Scan("s1", "15550000001"); err != nil { // returns while the sink is stuck
		t.Fatal(err)
	}
	for range 3 {
		n.Drop("s1", false)
		c.Connect(ctx)
	}
	close(release)
	waitFor(t, "events", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 9 })
	if _, ok := got[0].(network.QRCode); !ok {
		t.Fatalf("first event %#v", got[0])
	}
	want := []network.Event{network.Paired{Phone: "15550000001"}, network.Connected{Phone: "15550000001"}}
	for range 3 {
		want = append(want, network.Disconnected{Reason: "connection dropped", Reconnecting: true, StatusReason: network.ReasonNetwork},
			network.Connected{Phone: "15550000001"})
	}
	if !reflect.DeepEqual(got[1:], want) {
		t.Fatalf("events %#v\nwant %#v", got[1:], want)
	}
}

// Many sessions sending at once: every message delivered exactly once, indexes consistent.
func TestConcurrentSessions(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir, AutoPair: time.Millisecond})
	const sessions, perSession = 50, 40
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			r := &recorder{}
			id := "s" + strconv.Itoa(s)
			c, _ := n.Open(id, r.sink)
			c.Connect(ctx)
			if !poll(func() bool { _, ok := c.(*client).online(); return ok }) {
				t.Errorf("%s not paired and online", id)
				return
			}
			for i := range perSession {
				to := "1555000" + strconv.Itoa(1000+i%7)
				if _, err := c.Send(ctx, text(id+"-"+strconv.Itoa(i), to, "x")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range 7 {
		total += len(n.Messages("1555000" + strconv.Itoa(1000+i)))
	}
	if total != sessions*perSession || n.DeliveredCount() != sessions*perSession {
		t.Fatalf("delivered %d (count %d), want %d", total, n.DeliveredCount(), sessions*perSession)
	}
	n.Close()
	n = openSim(t, Options{Dir: dir})
	if n.DeliveredCount() != sessions*perSession {
		t.Fatalf("after reopen: %d", n.DeliveredCount())
	}
}

// Two ids whose hashes collide are told apart by the record on disk.
func TestHashCollision(t *testing.T) {
	n := openSim(t, Options{})
	c, _ := paired(t, n, "s1", "15550000001")
	if _, err := c.Send(ctx, text("a", "15551112222", "a")); err != nil {
		t.Fatal(err)
	}
	d := n.deliveries
	d.mu.Lock()
	offA, _, _ := d.find("a")
	d.ids[maphash.String(d.seed, "b")] = offA // b's hash now names a's record
	d.mu.Unlock()

	rb, err := c.Send(ctx, text("b", "15551112222", "b"))
	if err != nil || rb.ID != "b" {
		t.Fatalf("send b: %+v, %v", rb, err)
	}
	if again, err := c.Send(ctx, text("b", "15551112222", "b")); err != nil || again != rb {
		t.Fatalf("re-send b: %+v, %v; want %+v", again, err, rb)
	}
	if got := n.Messages("15551112222"); len(got) != 2 || got[1].Text != "b" {
		t.Fatalf("messages = %+v", got)
	}
}

// A record longer than the read buffers survives a reopen whole.
func TestLongRecord(t *testing.T) {
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	c, _ := paired(t, n, "s1", "15550000001")
	long := strings.Repeat("0123456789\"é", 30000) // about 400 KB of JSON
	for _, id := range []string{"a", "b"} {
		if _, err := c.Send(ctx, text(id, "15551112222", long)); err != nil {
			t.Fatal(err)
		}
	}
	n.Close()
	n = openSim(t, Options{Dir: dir})
	got := n.Messages("15551112222")
	if len(got) != 2 || got[0].Text != long || got[1].Text != long {
		t.Fatalf("%d long messages back", len(got))
	}
}
