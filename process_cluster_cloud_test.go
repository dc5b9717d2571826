//go:build cluster

package main

// A Cloud API number in make test-cluster (issue 29): its session lives on a partition gw2
// owns; Meta's webhooks come through a load balancer to any node and reach the partition's
// owner (routed by the session the URL names); the load sends to it through every node; gw2's
// kill -9 moves the session to another node (a cloud number holds no device lock), where it
// connects again at once and goes on; every accepted message reaches Meta once and is
// reported delivered through the webhooks.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

type ctCloud struct {
	t     testing.TB
	c     *ctCluster
	fake  *fakegraph.Server
	num   *cloudNumber
	proxy *httptest.Server // Meta's callback URL: a load balancer over the live nodes

	uid, tok, key, sid string
	contacts           []string

	mu       sync.Mutex
	accepted map[string]string // message id → contact
}

// newCtCloud starts the fake Graph API and the balancer in front of the nodes (c is set once
// the cluster is made).
func newCtCloud(t testing.TB) *ctCloud {
	cc := &ctCloud{t: t, num: &cloudNumber{id: "106540352299001", waba: "102290129399001", display: "+1 555-010-0901",
		token: "EAAJB-cluster", secret: "cluster-app-secret"}, accepted: map[string]string{}}
	cc.fake = newFakeGraph(t, cc.num)
	cc.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node := cc.c.nodes[cc.c.pick(-1)]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+node.addr+r.URL.RequestURI(), r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway) // Meta tries again
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}))
	t.Cleanup(cc.proxy.Close)
	return cc
}

// args are the nodes' Cloud API flags: the fake Graph API, and a short in-doubt wait. A send
// the kill -9 cut between its record and Meta's answer is not made again until Meta's status
// naming it has had that long to come (the default, 2 minutes, outlasts the test's checks).
func (cc *ctCloud) args() []string {
	return []string{"--cloud-graph-url", cc.fake.URL(), "--cloud-in-doubt", "20s"}
}

// setup connects the number for a user whose partition gw2 owns (through gw1), points Meta's
// app at the balancer, opens the contacts' windows and routes the user's messages over it.
func (cc *ctCloud) setup(admin string) {
	c, t := cc.c, cc.t
	owners, _ := c.state(0, admin)
	for i := 0; ; i++ {
		uid := fmt.Sprintf("cloud%03d", i)
		if owners[cluster.PartitionOf(uid, cluster.DefaultPartitions)] == "gw2" {
			cc.uid = uid
			break
		}
	}
	cc.tok = c.token(cc.uid, "")
	r := c.must(c.call(0, "POST", "/api/client/cloud/connect", bearerAuth(cc.tok), map[string]any{"phoneNumberId": cc.num.id,
		"wabaId": cc.num.waba, "accessToken": cc.num.token, "appSecret": cc.num.secret}), 200, "cloud connect")
	n, _ := r.obj()["number"].(map[string]any)
	cc.sid, _ = n["sessionId"].(string)
	if err := cc.fake.Subscribe(cc.num.app, cc.proxy.URL+"/api/cloud/webhook?session="+cc.sid, r.str("verifyToken")); err != nil {
		t.Fatal(err)
	}
	cc.key = c.must(c.call(1, "POST", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"userId": cc.uid, "name": "cloud load"}), 201, "cloud key").str("rawKey")
	c.must(c.call(2, "PATCH", "/api/client/routing", bearerAuth(cc.tok), map[string]any{"mode": "cloud"}), 200, "routing")
	for i := range 5 {
		to := fmt.Sprintf("1555090%04d", i)
		cc.contacts = append(cc.contacts, to)
		if _, err := cc.fake.Write(cc.num.id, fakegraph.Inbound{From: to, Text: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the contacts' messages through the balancer", func() bool {
		r := c.call(-1, "GET", "/api/v1/messages?direction=in&limit=10", keyAuth(cc.key), nil)
		ms, _ := r.obj()["messages"].([]any)
		return len(ms) == len(cc.contacts) && cc.connected()
	})
	t.Logf("cloud number connected for %s on a partition of gw2, Meta's webhooks through a balancer", cc.uid)
}

func (cc *ctCloud) connected() bool {
	r := cc.c.call(-1, "GET", "/api/client/cloud", bearerAuth(cc.tok), nil)
	n, _ := r.obj()["number"].(map[string]any)
	return n != nil && n["status"] == "CONNECTED"
}

// work sends to the number's contacts through the balancer until stop, each send with an
// Idempotency-Key (a retry after a 503 is the same message).
func (cc *ctCloud) work(stop <-chan struct{}, wg *sync.WaitGroup, seq func() int64) {
	every(stop, wg, func() time.Duration { return 100 * time.Millisecond }, func(n int) {
		to, tag := cc.contacts[n%len(cc.contacts)], fmt.Sprintf("c%d", seq())
		r := cc.c.call(-1, "POST", "/api/v1/messages/send", auth{"x-api-key": cc.key, "Idempotency-Key": "cloud-" + tag},
			map[string]any{"phone": to, "message": tag})
		if r.status != 200 {
			cc.c.fail("cloud send: %d %s", r.status, r.raw)
			return
		}
		cc.mu.Lock()
		cc.accepted[r.str("message_id")] = to
		cc.mu.Unlock()
	})
}

// moved checks, after gw2's kill -9, that the number's session is CONNECTED on the node that
// took its partition (a cloud number holds no device lock: it moves with the partition).
func (cc *ctCloud) moved(admin string) {
	eventually(cc.t, 30*time.Second, "the cloud session CONNECTED on another node", cc.connected)
	owners, _ := cc.c.state(0, admin)
	owner := owners[cluster.PartitionOf(cc.uid, cluster.DefaultPartitions)]
	if owner == "gw2" || owner == "" {
		cc.t.Errorf("the cloud number's partition is owned by %q after gw2's kill -9", owner)
	}
	cc.t.Logf("the cloud session (no device lock) moved from gw2 to %s with its partition, CONNECTED there", owner)
}

// check waits for every accepted message: at Meta once, reported delivered.
func (cc *ctCloud) check(when string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	bad := 0
	for id, to := range cc.accepted {
		var last ctResp
		eventuallyOr(cc.t, 60*time.Second, func() bool {
			last = cc.c.call(-1, "GET", "/api/v1/messages/"+id, keyAuth(cc.key), nil)
			return last.str("status") == "delivered"
		}, "%s: cloud message %s never reported delivered", when, id)
		if last.str("status") != "delivered" {
			cc.t.Logf("its record: %s", last.raw)
		}
		n := 0
		for _, got := range sentIDs(cc.fake, to) {
			if got == id {
				n++
			}
		}
		if n != 1 {
			cc.t.Errorf("%s: cloud message %s reached Meta %d times", when, id, n)
		}
		if n != 1 || last.str("status") != "delivered" {
			bad++
		}
	}
	if bad > 0 {
		return
	}
	cc.t.Logf("%s: %d Cloud API messages accepted, each at Meta once and delivered (statuses through the balancer to the owner)", when, len(cc.accepted))
}
