package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/cluster/clustertest"
)

// BenchmarkForward is one forwarded request (a 1 KiB body, echoed) from a node to the owner
// of the partition, on three in-process NATS servers; BenchmarkEnter is the same request's
// cost when the partition is the node's own (what forwarding adds to). Figures are relative
// (run on a quiet machine for absolute ones):
//
//	go test -run XXX -bench 'Forward|Enter' -benchtime 2000x ./cluster
func BenchmarkForward(b *testing.B) {
	c := clustertest.StartCluster(b, 3)
	tc := &testCluster{t: nil, nats: c, prefix: "b" + randomID()[:8], eng: newEngineStub(b)}
	a, o := benchStart(b, tc, "a:1"), benchStart(b, tc, "b:1")
	eventually(b, 30*time.Second, "32/32", func() bool { return len(tc.eng.runningOf("a:1")) == 32 && len(tc.eng.runningOf("b:1")) == 32 })
	p := tc.eng.runningOf(o.ID())[0]
	body := make([]byte, 1024)
	env := &Envelope{Route: "POST /x", Method: "POST", Path: "/x", Body: body}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := a.Forward(context.Background(), p, env); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkEnter(b *testing.B) {
	c := clustertest.StartCluster(b, 1)
	tc := &testCluster{nats: c, prefix: "b" + randomID()[:8], eng: newEngineStub(b)}
	a := benchStart(b, tc, "a:1")
	eventually(b, 30*time.Second, "a owns all", func() bool { return len(tc.eng.runningOf("a:1")) == DefaultPartitions })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		done, ok := a.Enter(i % DefaultPartitions)
		if !ok {
			b.Fatal("not entered")
		}
		done()
	}
}

func benchStart(b *testing.B, tc *testCluster, id string) *Node {
	nc := tc.nats.Connect(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, Config{Conn: nc, Prefix: tc.prefix, NodeID: id, Handler: tc.eng.handler(id), Replicas: tc.nats.N(), Serve: echo(id), Secret: testSecret})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(n.abort)
	return n
}
