package sim

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// A journal line is what encoding/json writes for the same delivery, tricky text included.
func TestDeliveryLineIsJSON(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 3, 22, 123000000, time.UTC)
	for _, d := range []domain.Delivered{
		{ID: "m1", From: "15550000001", To: "15551112222", Type: "text", Text: "hello", Timestamp: at},
		{ID: `q"uo\te`, From: "1", To: "2", Type: "text", Text: "tab\tnl\ncr\r bell\x07 é 日本 \xff\xfe end\u2028", Timestamp: at.Truncate(time.Second)},
		{ID: "m3", From: "1", To: "2", Type: "image", Caption: "<b>&</b>", FileName: "a.jpg", MimeType: "image/jpeg", Bytes: 12345, Timestamp: at},
		{ID: "m4", From: "1", To: "2", Type: "location", Lat: new(-23.5505), Lng: new(1e-7), Address: "São Paulo", Timestamp: at},
		{ID: "m5", From: "1", To: "2", Type: "contact", ContactName: "Ana", ContactPhone: "+1 555", Timestamp: at},
	} {
		got := appendDelivery(nil, &d)
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back domain.Delivered
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", d.ID, err, got)
		}
		var wantBack domain.Delivered
		_ = json.Unmarshal(want, &wantBack)
		if !reflect.DeepEqual(back, wantBack) {
			t.Fatalf("%s: reads back as\n%+v\nwant\n%+v", d.ID, back, wantBack)
		}
		if d.ID == "m1" && string(got) != string(want) {
			t.Fatalf("line:\n got %s\nwant %s", got, want)
		}
	}
}

// A killed process leaves its mapped journal at full size, zeros after the last record (or a
// record cut short by the kill): the next open replays exactly the records, appends after
// them, and a clean close cuts the file back to its records.
func TestMappedJournalAfterAKill(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	d, err := openDeliveries(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 200)
	const n = 6000 // over 1 MiB: the map grows past its first step
	for i := range n {
		if _, fresh, err := d.deliver(&domain.Delivered{ID: fmt.Sprintf("m%05d", i), From: "1", To: "2", Type: "text", Text: text, Timestamp: time.Now()}); err != nil || !fresh {
			t.Fatalf("deliver %d: %v %v", i, fresh, err)
		}
		// Each copy lands in pages faulted in ahead (prefault), within the map.
		if mapJournals && !d.j.noPrefault && (d.j.faulted < d.j.size || d.j.faulted > int64(len(d.j.m))) {
			t.Fatalf("deliver %d: records end at %d, pages faulted in to %d of a %d-byte map", i, d.j.size, d.j.faulted, len(d.j.m))
		}
	}
	if mapJournals && d.j.noPrefault {
		t.Log("this kernel cannot prefault (MADV_POPULATE_WRITE, Linux 5.14): the copies fault page by page")
	}
	path := filepath.Join(dir, "deliveries.jsonl")
	if mapJournals {
		if d.j.m == nil {
			t.Fatal("not mapped")
		}
		// The kill: a half-written record, and no close (the file keeps its mapped size).
		copy(d.j.m[d.j.size:], `{"id":"torn","fr`)
		info, _ := os.Stat(path)
		if info.Size() <= d.j.size {
			t.Fatalf("mapped file of %d bytes for %d of records", info.Size(), d.j.size)
		}
	}
	recorded := d.j.size
	_ = d.j.f.Close() // what the kill leaves: no unmap, no truncation
	d2, err := openDeliveries(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if d2.count.Load() != n || d2.j.size != recorded {
		t.Fatalf("after the kill: %d records, %d bytes; want %d, %d", d2.count.Load(), d2.j.size, n, recorded)
	}
	if _, fresh, err := d2.deliver(&domain.Delivered{ID: "m00007", From: "1", To: "2", Type: "text", Timestamp: time.Now()}); err != nil || fresh {
		t.Fatalf("a delivered id delivered again: %v %v", fresh, err)
	}
	if _, fresh, err := d2.deliver(&domain.Delivered{ID: "after", From: "1", To: "2", Type: "text", Text: "after", Timestamp: time.Now()}); err != nil || !fresh {
		t.Fatalf("deliver after: %v %v", fresh, err)
	}
	if err := d2.close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Size() != d2.j.size {
		t.Fatalf("closed journal of %d bytes, its records %d (%v)", info.Size(), d2.j.size, err)
	}
	d3, err := openDeliveries(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.close()
	got := d3.to("2")
	if len(got) != n+1 || got[n].Text != "after" || got[0].Text != text {
		t.Fatalf("%d deliveries, last %+v", len(got), got[len(got)-1])
	}
}

// BenchmarkDeliver is the sim's own cost of one delivery (encode, dedupe, journal append).
func BenchmarkDeliver(b *testing.B) {
	d, err := openDeliveries(b.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer d.close()
	text := "Hi Ana, your order #1001 has shipped. Track it at https://example.com/t/1001 - thanks for shopping with us!"
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m := domain.Delivered{ID: "3EB0" + fmt.Sprintf("%020X", i), From: "4915112345678", To: "4915100000001", Type: "text", Text: text, Timestamp: time.Now().UTC().Truncate(time.Millisecond)}
		if _, _, err := d.deliver(&m); err != nil {
			b.Fatal(err)
		}
	}
}
