package node

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/persist/natstest"
)

// A cluster node pages its partitions' outcomes per second, held (persist.Outbox.PagesPerSecond),
// which a node of the release before does not read: with --nats-window-pages (every node of a
// rolling upgrade from that release) it writes a page per 10 ms window, as that release does,
// and without it a second's pages. Either way a read by id answers the message sent.
func TestClusterPagesWindowedDuringARollingUpgrade(t *testing.T) {
	srv := natstest.Start(t)
	simNet, simURL := startSim(t)
	for _, windowed := range []bool{true, false} {
		t.Run(fmt.Sprintf("window-pages=%v", windowed), func(t *testing.T) {
			c := clusterConfig(t, "a", srv.URL, simURL)
			c.NATSPrefix = fmt.Sprintf("wp%v", windowed)
			c.NATSWindowPages = windowed
			n := startFirst(t, c)
			admin := n.token(t, "root", "admin")
			tok := n.signIn(t, "alice")
			n.link(t, simNet, tok, "447700900071")
			key, _ := n.newKey(t, admin, "alice", "shop")
			var ids []string
			for i := range 3 {
				ids = append(ids, n.must(t, 200, "POST", "/api/v1/messages/send", key,
					map[string]any{"phone": fmt.Sprintf("1555010007%d", i), "message": "m", "type": "text"}).str("message_id"))
			}
			var keys []string
			eventually(t, 10*time.Second, "every outcome paged", func() bool {
				keys = keys[:0]
				held := map[string]bool{}
				err := n.st.nats.ScanSinceSeq([]byte("outbox_page/"), time.Time{}, func(k, page []byte, _ uint64) error {
					keys = append(keys, string(k))
					for _, id := range ids {
						if bytes.Contains(page, []byte(id)) {
							held[id] = true
						}
					}
					return nil
				})
				return err == nil && len(held) == len(ids) // each id in a page
			})
			for _, k := range keys {
				if second := strings.HasPrefix(k, "outbox_page/s"); second == windowed {
					t.Fatalf("page %s with --nats-window-pages=%v", k, windowed)
				}
			}
			for _, id := range ids {
				if st := n.must(t, 200, "GET", "/api/v1/messages/"+id, key, nil).str("status"); st != "sent" && st != "delivered" && st != "read" {
					t.Fatalf("%s: status %q", id, st)
				}
			}
		})
	}
}
